-- publish.lua publishes a batch of events to session streams, each exactly as if it were published
-- alone. The call is atomic, so no reader can tell it from its events published one after another.
--
-- KEYS: per session block b = 1..B, KEYS[2b-1] its stream and KEYS[2b] its meta hash.
-- ARGV: [1] maxlen, [2] minid (ms), [3] ttl (ms), [4] fresh epoch; then per block its notify
-- channel, its event count n and its opening ("" none, "<fid>:<floor>" to open the fence
-- generation fid at floor, "*" an unfenced publisher: floor 0, nothing stored), then n events of
-- 7: turn id, token, type, data, terminal ("1" or "0"), traceparent,
-- verified ("" or the fence generation whose Postgres token the caller checked after it began).
-- Returns one string of 2 lines per event, blocks in order: the status, then the cursor (statuses
-- 1 and 0), "" (-1), the fence generation (-3 and -4) or the error message (-2, its line
-- breaks made spaces).
--
-- What each event does:
--
--   * Fencing: a token older than the newest one the turn has published with (meta f:<turn>) is
--     stale (status -1) and changes nothing, so a zombie attempt changes nothing once a newer
--     attempt has spoken; otherwise a newer token is recorded.
--   * Fence generations (doc.go has the argument): the fences of a meta hash are complete for
--     tokens above its floor. A meta hash without a floor is not open: the call names (or mints,
--     as fid) its fence generation and writes nothing else (status -3); the caller reads the floor
--     (the newest token Postgres has handed out) and opens it with "<fid>:<floor>". An event whose
--     turn has no fence here and whose token is at most the floor may be a zombie whose newer
--     attempt spoke before the hash was lost: it needs the caller's word that Postgres still holds
--     its token, given after the generation began (verified = fid), else it changes nothing
--     (status -4).
--   * Generations: with no epoch in the meta hash, or no stream key, a new generation starts under
--     the fresh epoch the caller minted: whatever the old stream held is gone, so its readers must
--     reset. The fencing tokens (f:*) and terminal markers (t:*) are kept: a turn's newest attempt
--     and its one terminal event stay facts across generations, so a zombie cannot slip in after a
--     loss.
--   * At most one terminal event per turn: a repeated one appends nothing and returns the existing
--     one's cursor (status 0) from the marker t:<turn> = "<epoch>:<id>".
--   * The append (status 1): XADD with approximate MAXLEN; the entry's "prev" field names the entry
--     before it, so a reader can tell a cursor just before the oldest retained entry (nothing lost)
--     from one further back (trimmed history), which Redis does not record for trimming.
--   * After the session's last append in the call: trim by age (approximate MINID), set the idle
--     TTL of both keys, and publish that append's cursor "<epoch>:<id>" on the notify channel.
--
-- Why doing some of it once per session per call is exact:
--
--   * One HMGET reads a turn's fence and terminal marker (with the session's first event also its
--     epoch and "last"); one HSET writes what the turn's events changed, before another turn's
--     fields are read and after the session's last event (flush).
--   * meta "last" is the newest entry this script appended, so prev needs no read of the newest
--     entry. "last" is checked, not trusted: XREVRANGE + (last COUNT 1 is empty unless something
--     else appended after it, and then returns the real newest entry, which becomes prev. With an
--     empty reply, EXISTS tells a stream that still ends at "last" from a lost one. Without an
--     epoch (the meta hash was lost but the stream may not have been) or without "last", the newest
--     entry is read whole. Only removing the newest entry by hand (XDEL, or trimming the stream
--     empty) makes prev name the removed entry.
--   * MINID is the same for the whole call, an entry appended now is never older than it, and
--     trimming removes whole nodes from the head, so one trim after the session's last append
--     removes what one after each append would (short of Redis's cap on one approximate trim, 100
--     nodes' worth; the next call goes on). A stream the call created has nothing to trim by age
--     and is not trimmed. The TTLs end where the call's last append leaves them.
--   * A reader takes a notification as the signal to read its session's stream from its own
--     cursor (the gateway does not read the payload), so one per session per call is enough.
--   * The call's sessions share its one fresh epoch: an epoch only has to differ from the same
--     session's earlier ones, and a session's keys cannot vanish while the call runs, so it starts
--     at most one generation in it.
--
-- Events come grouped by session, each session's in the order given; sessions share no keys, so
-- their relative order cannot matter. A Redis error that belongs to one session's keys (a key of the
-- wrong type) fails that session's events (status -2, with the message), and memory full before the
-- first write fails the events that would have written.
local KEYS, ARGV, rcall, rpcall = KEYS, ARGV, redis.call, redis.pcall
local tonumber, type, unpack = tonumber, type, unpack
local maxlen, minid, ttl, fresh = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local out, o = {}, 0
-- h holds a session's HSET arguments, wrote the places in out of the events that put fields in
-- it: one table each for the whole call, so no session allocates them.
local h, hn, wrote, wn = {}, 0, {}, 0
local function field(f, v)
  h[hn + 1], h[hn + 2] = f, v
  hn = hn + 2
end
-- flush writes the fields gathered since the last flush in one HSET, the later of two values of a
-- field last, as an HSET per event would have left them. It fails only as the first
-- write of the call (memory full: Redis refuses a script's writes only until one succeeded), so
-- only when every append before it failed too, and then it fails each event that gave it a field,
-- as that event's own HSET would have.
local function flush(meta)
  if hn > 0 then
    local r = rpcall('HSET', meta, unpack(h, 1, hn))
    if type(r) == 'table' then
      for i = 1, wn do
        local w = wrote[i]
        if out[w] ~= -2 then
          out[w], out[w + 1] = -2, (string.gsub(r.err, '\n', ' '))
        end
      end
    end
  end
  hn, wn = 0, 0
end
local a, b, nargs = 5, 0, #ARGV
while a <= nargs do
  b = b + 1
  local events, meta = KEYS[2 * b - 1], KEYS[2 * b]
  local notify, n, open = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
  a = a + 3
  -- The session as far as this call knows it; it updates these with its own writes, and nothing
  -- else writes while it runs. prev and exists are nil until known.
  local loaded, err = false, nil
  local epoch, last = false, false
  local exists, prev
  -- The fence generation and its floor (a number; nil while not open), and whether the
  -- generation is not open (pending) or was minted by this call (minted).
  local fid, floor, pending, minted = false, nil, false, false
  -- existed: whether the stream was there before this call's first append to it. cursor: the
  -- cursor of the session's newest append in this call.
  local existed, cursor = true, nil
  -- The turn whose meta fields were read last, and its fence and terminal marker (strings).
  local turn, fkey, tkey, fence, term
  for _ = 1, n do
    local t, token, terminal = ARGV[a], ARGV[a + 1], ARGV[a + 4] == '1'
    local status, res = -1, ''
    local fields = hn
    repeat
      if err then
        status, res = -2, err
        break
      end
      if pending then
        status, res = -3, fid
        break
      end
      if t ~= turn then
        -- Another turn's fields are read from the hash, so what this call changed goes there
        -- first.
        flush(meta)
        local fk, tk = 'f:' .. t, 't:' .. t
        local r
        if loaded then
          r = rpcall('HMGET', meta, fk, tk)
        else
          r = rpcall('HMGET', meta, fk, tk, 'epoch', 'last', 'fid', 'floor')
        end
        if r.err then
          err, status, res = r.err, -2, r.err
          break
        end
        if not loaded then
          loaded = true
          -- last names an entry of the epoch's stream: without an epoch it names nothing.
          epoch = r[3]
          last = epoch and r[4]
          fid = r[5]
          if r[6] then
            floor = tonumber(r[6])
          elseif open == '*' then
            floor = 0
          elseif fid and string.sub(open, 1, #fid + 1) == fid .. ':' then
            floor = tonumber(string.sub(open, #fid + 2))
            field('floor', string.sub(open, #fid + 2))
          end
          if not floor then
            pending = true
            if not fid then
              fid, minted = fresh, true
              field('fid', fresh)
            end
          end
        end
        turn, fkey, tkey, fence, term = t, fk, tk, r[1], r[2]
      end
      if pending then
        status, res = -3, fid
        break
      end
      -- Tokens are compared as numbers, but an equal string (the same attempt again) needs no
      -- conversion.
      local newer = not fence
      if fence and fence ~= token then
        local f, k = tonumber(fence), tonumber(token)
        if f > k then
          break
        end
        newer = f < k
      end
      if not fence and floor > 0 and tonumber(token) <= floor then
        -- The turn has not spoken in this generation, and its token is older than the
        -- generation: a newer attempt may have spoken in a lost one.
        if ARGV[a + 6] ~= fid then
          status, res = -4, fid
          break
        end
      end
      local repeated = terminal and term
      if prev == nil then
        local r
        if last then
          r = rpcall('XREVRANGE', events, '+', '(' .. last, 'COUNT', 1)
        else
          r = rpcall('XREVRANGE', events, '+', '-', 'COUNT', 1)
        end
        if r.err then
          err, status, res = r.err, -2, r.err
          break
        end
        if r[1] then
          exists, prev = true, r[1][1]
        elseif epoch then
          -- Nothing after last (or no entries at all): is the stream there?
          exists = rcall('EXISTS', events) == 1
          prev = exists and last or ''
        else
          -- No epoch: a new generation starts whether the stream is absent or empty.
          exists, prev = false, ''
        end
        existed = exists
      end
      if not epoch or not exists then
        epoch = fresh
        field('epoch', fresh)
      end
      if newer then
        fence = token
        field(fkey, token)
      end
      if repeated then
        -- A marker without an epoch ("<id>" alone) is the current epoch's.
        status, res = 0, term
        if not string.find(term, ':', 1, true) then
          res = epoch .. ':' .. term
        end
        break
      end
      local id = rpcall('XADD', events, 'MAXLEN', '~', maxlen, '*',
        'type', ARGV[a + 2], 'turn', t, 'data', ARGV[a + 3], 'tp', ARGV[a + 5], 'prev', prev)
      if type(id) == 'table' then
        status, res = -2, id.err
        break
      end
      exists, prev, cursor = true, id, epoch .. ':' .. id
      if terminal then
        term = cursor
        field(tkey, cursor)
      end
      status, res = 1, cursor
    until true
    if hn > fields then
      wrote[wn + 1] = o + 1
      wn = wn + 1
    end
    if status == -2 then
      res = (string.gsub(res, '\n', ' '))
    end
    out[o + 1], out[o + 2] = status, res
    o = o + 2
    a = a + 7
  end
  if cursor then
    field('last', prev)
  end
  -- Written even where an append failed, as the fence and epoch were before it.
  flush(meta)
  if minted then
    -- A hash this call made (it holds the fence generation alone) must not outlive its TTL.
    rcall('PEXPIRE', meta, ttl)
  end
  if cursor then
    -- A stream this call created holds no entry older than minid, so only one that existed
    -- can need trimming by age.
    if existed then
      rcall('XTRIM', events, 'MINID', '~', minid)
    end
    rcall('PEXPIRE', events, ttl)
    rcall('PEXPIRE', meta, ttl)
    -- One notification for the session's appends: readers take it as a signal to read the
    -- stream from where they are, not as the cursor of each entry.
    rcall('PUBLISH', notify, cursor)
  end
end
return table.concat(out, '\n')
