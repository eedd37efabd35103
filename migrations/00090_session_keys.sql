-- +goose Up
-- A session is named by its tenant and its ID together (pkg/wire.SessionKey: tenant "/" session
-- ID) in every key, so nothing another tenant sends can reach it. Rows written before are renamed
-- here so an upgraded stack keeps its history. Neither a tenant nor a session ID can contain "/",
-- so a session_id without one is of the old shape. The history goes first: its session's tenant
-- is read from sessions (written in the same statement as every history row) under the old name.
-- A turn goes to its own tenant's session, even where an older intake let it into another's.
UPDATE session_history h SET session_id = s.tenant || '/' || h.session_id
FROM sessions s WHERE s.session_id = h.session_id AND position('/' in h.session_id) = 0;
UPDATE turns SET session_id = tenant || '/' || session_id WHERE position('/' in session_id) = 0;
UPDATE sessions SET session_id = tenant || '/' || session_id WHERE position('/' in session_id) = 0;

-- +goose Down
-- The old names cannot tell two tenants' sessions of one ID apart: of such sessions the oldest
-- keeps its row and history, the others' history is dropped.
DELETE FROM session_history h USING sessions s, sessions o
WHERE s.session_id = h.session_id AND o.session_id <> s.session_id
  AND substr(o.session_id, position('/' in o.session_id) + 1) = substr(s.session_id, position('/' in s.session_id) + 1)
  AND (o.created_at, o.session_id) < (s.created_at, s.session_id);
DELETE FROM sessions s USING sessions o
WHERE o.session_id <> s.session_id
  AND substr(o.session_id, position('/' in o.session_id) + 1) = substr(s.session_id, position('/' in s.session_id) + 1)
  AND (o.created_at, o.session_id) < (s.created_at, s.session_id);
UPDATE session_history SET session_id = substr(session_id, position('/' in session_id) + 1) WHERE position('/' in session_id) > 0;
UPDATE turns SET session_id = substr(session_id, position('/' in session_id) + 1) WHERE position('/' in session_id) > 0;
UPDATE sessions SET session_id = substr(session_id, position('/' in session_id) + 1) WHERE position('/' in session_id) > 0;
