import { useCallback, useEffect, useRef, useState } from 'react';
import { api } from './api.js';
import { href } from './router.js';

// useLoad runs load() now, again when deps change, and every `every` ms while `every` is set;
// it keeps the last answer while a reload runs.
export function useLoad(load, deps, every) {
  const [state, setState] = useState({ data: null, error: null, loading: true });
  const seq = useRef(0);
  const run = useCallback(async () => {
    const n = ++seq.current;
    setState((s) => ({ ...s, loading: true }));
    try {
      const data = await load();
      if (n === seq.current) setState({ data, error: null, loading: false });
    } catch (error) {
      if (n === seq.current) setState((s) => ({ data: s.data, error, loading: false }));
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);
  useEffect(() => {
    run();
    if (!every) return undefined;
    const t = setInterval(run, every);
    return () => clearInterval(t);
  }, [run, every]);
  return { ...state, reload: run };
}

export function ErrorBox({ error }) {
  if (!error) return null;
  return (
    <div className="error" role="alert" data-status={error.status || ''}>
      {error.status ? <strong>{error.status === 404 ? 'Not found' : `HTTP ${error.status}`}: </strong> : null}
      {error.message}
    </div>
  );
}

export function Status({ status }) {
  return <span className={`status status-${status}`}>{status}</span>;
}

export function Time({ at }) {
  if (!at) return <span className="muted">–</span>;
  const d = new Date(at);
  return <time dateTime={at} title={at}>{d.toLocaleString()}</time>;
}

export function TurnLink({ id }) {
  return <a className="turn-link" href={href(`/turn/${encodeURIComponent(id)}`)}>{id}</a>;
}

export function SessionLink({ tenant, session }) {
  return <a href={href(`/session/${encodeURIComponent(tenant)}/${encodeURIComponent(session)}`)}>{session}</a>;
}

// TurnsTable lists turns with links to each turn and its session; extra renders a last column.
export function TurnsTable({ turns, id, extra }) {
  return (
    <table id={id} className="grid">
      <thead>
        <tr><th>Turn</th><th>Status</th><th>Tenant</th><th>Session</th><th>Agent</th><th>Attempts</th><th>Accepted</th><th>Error</th>{extra ? <th /> : null}</tr>
      </thead>
      <tbody>
        {turns.map((t) => (
          <tr key={t.turn_id} data-turn={t.turn_id} data-status={t.status}>
            <td><TurnLink id={t.turn_id} />{t.dead_lettered ? <span className="tag">dead letter</span> : null}{t.replay_of ? <span className="tag">replay</span> : null}</td>
            <td><Status status={t.status} /></td>
            <td>{t.tenant}</td>
            <td><SessionLink tenant={t.tenant} session={t.session_id} /></td>
            <td>{t.agent}</td>
            <td>{t.attempts}</td>
            <td><Time at={t.accepted_at} /></td>
            <td className="err-cell">{t.error}</td>
            {extra ? <td>{extra(t)}</td> : null}
          </tr>
        ))}
        {turns.length === 0 ? <tr className="empty"><td colSpan={extra ? 9 : 8}>No turns.</td></tr> : null}
      </tbody>
    </table>
  );
}

// Action is a button that runs act(), shows its error, and is disabled while it runs.
export function Action({ id, label, act, className }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const click = async () => {
    setBusy(true);
    setError(null);
    try {
      await act();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span className="action">
      <button type="button" id={id} className={className} disabled={busy} onClick={click}>{label}</button>
      <ErrorBox error={error} />
    </span>
  );
}

export { api };
