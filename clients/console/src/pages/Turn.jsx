import { useEffect, useRef, useState } from 'react';
import { api, seg } from '../api.js';
import { Action, ErrorBox, SessionLink, Status, Time, TurnLink, TurnsTable, useLoad } from '../components.jsx';
import { go } from '../router.js';

const TERMINAL = ['turn.completed', 'turn.failed', 'turn.cancelled', 'turn.expired'];
const EVENTS = ['turn.started', 'turn.delta', 'turn.tool_call', 'turn.tool_result', 'turn.retrying', 'turn.waiting',
  ...TERMINAL, 'stream.reset', 'stream.revoked'];
const live = (status) => status === 'queued' || status === 'running';

// LiveStream follows the turn through the gateway's SSE: a stream token for the turn's session
// from the admin API, then EventSource with ?turn_id= (the gateway ends the stream at the turn's
// terminal event; the page closes it there, so it does not reconnect).
function LiveStream({ turn, onEnd }) {
  const [state, setState] = useState('connecting');
  const [events, setEvents] = useState([]);
  const [error, setError] = useState(null);
  const ended = useRef(false);
  const shown = turn.client_turn_id || turn.turn_id;
  useEffect(() => {
    let es = null;
    let closed = false;
    (async () => {
      try {
        const grant = await api(`/v1/admin/turns/${seg(turn.turn_id)}/stream-token`, { method: 'POST' });
        if (closed) return;
        const url = `${grant.stream_url}?turn_id=${seg(shown)}&access_token=${seg(grant.stream_token)}`;
        es = new EventSource(url);
        es.onopen = () => setState('live');
        es.onerror = () => setState(es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting');
        for (const name of EVENTS) {
          es.addEventListener(name, (e) => {
            let data = null;
            try {
              data = JSON.parse(e.data);
            } catch {
              data = { raw: e.data };
            }
            if (data && data.turn_id && data.turn_id !== shown) return;
            setEvents((evs) => [...evs, { id: e.lastEventId, type: name, data }]);
            if (TERMINAL.includes(name) || name === 'stream.revoked') {
              es.close();
              setState(name === 'stream.revoked' ? 'revoked' : 'ended');
              if (!ended.current) {
                ended.current = true;
                onEnd();
              }
            }
          });
        }
      } catch (e) {
        if (!closed) {
          setError(e);
          setState('closed');
        }
      }
    })();
    return () => {
      closed = true;
      if (es) es.close();
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [turn.turn_id]);
  const text = events.filter((e) => e.type === 'turn.delta').map((e) => e.data.text || '').join('');
  return (
    <div id="live" className="panel" data-state={state}>
      <h2>Live stream <span id="live-state" className={`conn conn-${state}`}>{state}</span></h2>
      <ErrorBox error={error} />
      <pre id="live-text" className="output">{text}</pre>
      <ol id="live-events" className="events">
        {events.map((e, i) => (
          <li key={e.id || i} data-type={e.type} data-attempt={e.data && e.data.attempt}>
            <code>{e.type}</code> <span className="muted">attempt {e.data && e.data.attempt}</span>
            {e.type === 'turn.delta' ? null : <span className="muted"> {e.data && (e.data.error || e.data.reason || '')}</span>}
          </li>
        ))}
      </ol>
    </div>
  );
}

// ReplayForm replays the turn as a new turn of its session, optionally on another agent or with
// other metadata (agent settings), and opens the new turn's page.
function ReplayForm({ turn }) {
  const [agent, setAgent] = useState('');
  const [metadata, setMetadata] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    const body = {};
    if (agent) body.agent = agent;
    if (metadata.trim()) {
      try {
        body.metadata = JSON.parse(metadata);
      } catch (err) {
        setError(new Error(`metadata is not JSON: ${err.message}`));
        return;
      }
    }
    setBusy(true);
    try {
      const acted = await api(`/v1/admin/turns/${seg(turn.turn_id)}/replay`, { method: 'POST', body });
      go(`/turn/${acted.replay.turn_id}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form id="replay-form" className="panel inline" onSubmit={submit}>
      <h2>Replay</h2>
      <label>Agent<input id="replay-agent" placeholder={turn.agent} value={agent} onChange={(e) => setAgent(e.target.value)} /></label>
      <label>Metadata (JSON, replaces the original's)<textarea id="replay-metadata" rows={2} placeholder={turn.metadata ? JSON.stringify(turn.metadata) : '{}'} value={metadata} onChange={(e) => setMetadata(e.target.value)} /></label>
      <button id="replay" type="submit" disabled={busy}>Replay as a new turn</button>
      <ErrorBox error={error} />
    </form>
  );
}

function Blockers({ turn }) {
  const b = useLoad(() => api(`/v1/admin/turns/${seg(turn.turn_id)}/blockers`), [turn.turn_id, turn.status]);
  return (
    <div id="blockers" className="panel">
      <h2>What blocks it</h2>
      <ErrorBox error={b.error} />
      {b.data ? (b.data.blocking.length ? <TurnsTable turns={b.data.blocking} /> : <p className="muted">Nothing ahead of it in its session.</p>) : null}
    </div>
  );
}

export function TurnPage({ id }) {
  const [watch, setWatch] = useState(null);
  const tl = useLoad(() => api(`/v1/admin/turns/${seg(id)}/timeline`), [id]);
  const t = tl.data && tl.data.turn;
  useEffect(() => {
    if (t && live(t.status) && watch === null) setWatch(true);
  }, [t, watch]);
  useEffect(() => setWatch(null), [id]);
  if (!tl.data) return <section id="turn-page"><h1>Turn {id}</h1><ErrorBox error={tl.error} /></section>;
  const d = tl.data;
  return (
    <section id="turn-page" data-status={t.status}>
      <h1>Turn <code id="turn-id">{t.turn_id}</code> <Status status={t.status} /></h1>
      <ErrorBox error={tl.error} />
      <dl className="facts">
        <dt>Tenant</dt><dd id="turn-tenant">{t.tenant}</dd>
        <dt>Session</dt><dd><SessionLink tenant={t.tenant} session={t.session_id} /></dd>
        <dt>Agent</dt><dd>{t.agent}</dd>
        <dt>Attempts</dt><dd>{t.attempts} (handoffs {t.handoffs})</dd>
        <dt>Accepted</dt><dd><Time at={t.accepted_at} /></dd>
        <dt>Started</dt><dd><Time at={t.started_at} /></dd>
        <dt>Finished</dt><dd><Time at={t.finished_at} /></dd>
        <dt>Deadline</dt><dd><Time at={t.deadline} /></dd>
        {t.error ? <><dt>Error</dt><dd id="turn-error" className="err-cell">{t.error}</dd></> : null}
        {t.dead_lettered ? <><dt>Dead-lettered</dt><dd id="turn-dead">{t.dead_lettered}</dd></> : null}
        {t.replay_of ? <><dt>Replay of</dt><dd id="replay-of"><TurnLink id={t.replay_of} /></dd></> : null}
        {d.replays.length ? <><dt>Replayed as</dt><dd id="replays">{d.replays.map((r) => <TurnLink key={r} id={r} />)}</dd></> : null}
        <dt>Lease</dt><dd>{d.lease.owner || '–'} · fencing token {d.lease.fencing_token} · expires <Time at={d.lease.expires_at} /> · redrives {d.lease.redrives}</dd>
        <dt>Input</dt><dd><pre className="output">{t.input && t.input.text !== undefined ? t.input.text : JSON.stringify(t.input)}</pre></dd>
        {t.output ? <><dt>Output</dt><dd><pre id="turn-output" className="output">{t.output.text !== undefined ? t.output.text : JSON.stringify(t.output)}</pre></dd></> : null}
        {t.metadata ? <><dt>Metadata</dt><dd><code>{JSON.stringify(t.metadata)}</code></dd></> : null}
      </dl>
      <div className="actions">
        <button type="button" id="reload" onClick={tl.reload}>Reload</button>
        {live(t.status) ? <Action id="cancel" label="Cancel" act={async () => { await api(`/v1/admin/turns/${seg(t.turn_id)}/cancel`, { method: 'POST' }); tl.reload(); }} /> : null}
        {!watch ? <button type="button" id="watch" onClick={() => setWatch(true)}>Watch the stream</button> : null}
      </div>
      {watch ? <LiveStream key={t.turn_id} turn={t} onEnd={tl.reload} /> : null}
      {!live(t.status) ? <ReplayForm turn={t} /> : <Blockers turn={t} />}
      <div className="panel">
        <h2>Attempts</h2>
        <table id="attempts" className="grid">
          <thead><tr><th>#</th><th>Worker</th><th>Token</th><th>Started</th><th>Lease until</th><th>Ended</th><th>Outcome</th><th>Error</th><th>Upstream</th><th>Events</th><th>Waits</th></tr></thead>
          <tbody>
            {d.attempts.map((a) => (
              <tr key={a.attempt} data-attempt={a.attempt} data-outcome={a.outcome || ''} data-token={a.fencing_token || ''}>
                <td>{a.attempt}</td><td>{a.worker}</td><td>{a.fencing_token}</td><td><Time at={a.started_at} /></td>
                <td><Time at={a.lease_expires_at} /></td><td><Time at={a.ended_at} /></td>
                <td>{a.outcome || <span className="muted">running</span>}</td>
                <td className="err-cell">{a.error}</td><td>{a.upstream}</td><td>{a.events}</td><td>{a.waits}</td>
              </tr>
            ))}
            {d.attempts.length === 0 ? <tr className="empty"><td colSpan={11}>No attempt recorded.</td></tr> : null}
          </tbody>
        </table>
      </div>
      <div className="panel">
        <h2>Events</h2>
        <ol id="events" className="events">
          {d.events.map((e) => (
            <li key={e.id} data-type={e.type}><code>{e.id}</code> <b>{e.type}</b> <span className="muted">attempt {e.attempt}</span>
              {e.type !== 'turn.delta' && e.data ? <code className="data">{JSON.stringify(e.data)}</code> : null}</li>
          ))}
        </ol>
      </div>
      {d.notifications.length ? (
        <div className="panel">
          <h2>Notifications</h2>
          <table id="notifications" className="grid">
            <thead><tr><th>URL</th><th>Status</th><th>Attempts</th><th>Created</th><th>Delivered</th><th>Last error</th></tr></thead>
            <tbody>{d.notifications.map((n) => <tr key={n.id}><td>{n.url}</td><td>{n.status}</td><td>{n.attempts}</td><td><Time at={n.created_at} /></td><td><Time at={n.delivered_at} /></td><td>{n.last_error}</td></tr>)}</tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}
