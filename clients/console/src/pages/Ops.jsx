import { useState } from 'react';
import { api, query, seg } from '../api.js';
import { Action, ErrorBox, Status, Time, TurnLink, TurnsTable, useLoad } from '../components.jsx';
import { go, href } from '../router.js';
import { FILTERS, filterOf } from './Turns.jsx';

// SessionPage: a session's turns, newest first, and the live turns ahead of its newest queued one
// (the claim starts a session's turn only once every earlier one has ended).
export function SessionPage({ tenant, session }) {
  const turns = useLoad(() => api(`/v1/admin/turns${query({ tenant, session_id: session, limit: 200 })}`), [tenant, session], 3000);
  const queued = turns.data ? turns.data.turns.filter((t) => t.status === 'queued') : [];
  const newestQueued = queued.length ? queued[0].turn_id : '';
  const blockers = useLoad(() => (newestQueued ? api(`/v1/admin/turns/${seg(newestQueued)}/blockers`) : Promise.resolve(null)), [newestQueued]);
  return (
    <section id="session-page">
      <h1>Session <code>{session}</code> <span className="muted">of {tenant}</span></h1>
      <ErrorBox error={turns.error || blockers.error} />
      <div id="session-blockers" className="panel">
        <h2>What blocks it</h2>
        {!newestQueued ? <p className="muted">No queued turn: nothing waits in this session.</p> : null}
        {newestQueued && blockers.data ? (
          <>
            <p>Queued turn <TurnLink id={newestQueued} /> waits for {blockers.data.blocking.length} live turn(s) accepted before it:</p>
            <TurnsTable turns={blockers.data.blocking} />
          </>
        ) : null}
      </div>
      {turns.data ? <TurnsTable id="session-turns" turns={turns.data.turns} /> : null}
    </section>
  );
}

// PauseForm pauses a tenant's queue, an agent's, or one tenant's turns of one agent.
function PauseForm({ onDone }) {
  const [tenant, setTenant] = useState('');
  const [agent, setAgent] = useState('');
  const [reason, setReason] = useState('');
  const [error, setError] = useState(null);
  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      await api('/v1/admin/pauses', { method: 'POST', body: { tenant: tenant || undefined, agent: agent || undefined, reason: reason || undefined } });
      setTenant('');
      setAgent('');
      setReason('');
      onDone();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form id="pause-form" className="inline" onSubmit={submit}>
      <label>Tenant<input id="pause-tenant" placeholder="every tenant" value={tenant} onChange={(e) => setTenant(e.target.value)} /></label>
      <label>Agent<input id="pause-agent" placeholder="every agent" value={agent} onChange={(e) => setAgent(e.target.value)} /></label>
      <label>Reason<input id="pause-reason" value={reason} onChange={(e) => setReason(e.target.value)} /></label>
      <button id="pause" type="submit">Pause</button>
      <ErrorBox error={error} />
    </form>
  );
}

// BacklogPage: live turns by agent and tenant, oldest queued first, paused turns apart (not
// backlog: more workers cannot start them), and the queue pauses with their resume.
export function BacklogPage() {
  const b = useLoad(() => api('/v1/admin/backlog'), [], 2000);
  const p = useLoad(() => api('/v1/admin/pauses'), [], 2000);
  const reload = () => {
    b.reload();
    p.reload();
  };
  return (
    <section id="backlog-page">
      <h1>Backlog</h1>
      <ErrorBox error={b.error} />
      {b.data ? (
        <table id="backlog" className="grid">
          <thead><tr><th>Agent</th><th>Tenant</th><th>Queued</th><th>Paused</th><th>Running</th><th>Oldest queued</th><th>Age</th><th /></tr></thead>
          <tbody>
            {b.data.backlog.map((r) => (
              <tr key={`${r.agent}/${r.tenant}`} data-agent={r.agent} data-tenant={r.tenant} data-queued={r.queued} data-paused={r.paused} data-running={r.running}>
                <td>{r.agent}</td><td>{r.tenant}</td><td className="num">{r.queued}</td>
                <td className="num">{r.paused ? <span className="status status-paused">{r.paused} paused</span> : 0}</td>
                <td className="num">{r.running}</td>
                <td><Time at={r.oldest_queued_at} /></td><td className="num">{r.age_seconds.toFixed(1)} s</td>
                <td><a href={href('/turns', { agent: r.agent, tenant: r.tenant, status: 'queued' })}>queued turns</a></td>
              </tr>
            ))}
            {b.data.backlog.length === 0 ? <tr className="empty"><td colSpan={8}>No live turns.</td></tr> : null}
          </tbody>
        </table>
      ) : null}
      <div id="pauses-panel" className="panel">
        <h2>Paused queues</h2>
        <p className="muted">Workers start no turn a pause covers (running turns finish); its turns stay queued, in order, until it is resumed.</p>
        <ErrorBox error={p.error} />
        {p.data ? (
          <table id="pauses" className="grid">
            <thead><tr><th>Tenant</th><th>Agent</th><th>Queued turns held</th><th>Reason</th><th>By</th><th>Since</th><th /></tr></thead>
            <tbody>
              {p.data.pauses.map((x) => (
                <tr key={`${x.tenant}/${x.agent}`} data-tenant={x.tenant} data-agent={x.agent} data-queued={x.queued}>
                  <td>{x.tenant || <span className="muted">every tenant</span>}</td><td>{x.agent || <span className="muted">every agent</span>}</td>
                  <td className="num">{x.queued}</td><td>{x.reason}</td><td><code>{x.paused_by}</code></td><td><Time at={x.paused_at} /></td>
                  <td><Action className="resume" label="Resume" act={async () => { await api('/v1/admin/pauses/resume', { method: 'POST', body: { tenant: x.tenant || undefined, agent: x.agent || undefined } }); reload(); }} /></td>
                </tr>
              ))}
              {p.data.pauses.length === 0 ? <tr className="empty"><td colSpan={7}>No queue is paused.</td></tr> : null}
            </tbody>
          </table>
        ) : null}
        <PauseForm onDone={reload} />
      </div>
    </section>
  );
}

// WorkersPage: the worker processes seen lately, with their version, agents and turns in flight,
// and a drain (an admin key's): the worker stops claiming, finishes or hands off its turns, idles.
export function WorkersPage() {
  const w = useLoad(() => api('/v1/admin/workers'), [], 3000);
  return (
    <section id="workers-page">
      <h1>Workers</h1>
      <ErrorBox error={w.error} />
      {w.data ? (
        <table id="workers" className="grid">
          <thead><tr><th>Identity</th><th>Version</th><th>Agents</th><th>Turns in flight</th><th>State</th><th>Started</th><th>Last seen</th><th /></tr></thead>
          <tbody>
            {w.data.workers.map((k) => {
              const state = !k.alive ? 'gone' : k.draining ? 'draining' : k.drain_requested ? 'drain requested' : 'serving';
              return (
                <tr key={k.identity} data-worker={k.identity} data-state={state}>
                  <td>{k.identity}</td><td>{k.version}</td><td>{(k.agents || []).join(', ')}</td><td className="num">{k.in_flight}</td>
                  <td><span className={`status status-${state.replace(' ', '-')}`}>{state}</span></td>
                  <td><Time at={k.started_at} /></td><td><Time at={k.last_seen} /></td>
                  <td>{k.alive && !k.drain_requested && !k.draining ? <Action className="drain" label="Drain" act={async () => { await api(`/v1/admin/workers/${seg(k.identity)}/drain`, { method: 'POST' }); w.reload(); }} /> : null}</td>
                </tr>
              );
            })}
            {w.data.workers.length === 0 ? <tr className="empty"><td colSpan={8}>No worker seen lately.</td></tr> : null}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

// DeadLettersPage: dead-lettered turns, each with a replay button, and a bulk replay of them.
export function DeadLettersPage({ params }) {
  const cursor = params.get('cursor') || '';
  const dl = useLoad(() => api(`/v1/admin/dead-letters${query({ cursor, limit: 50 })}`), [cursor]);
  const [replayed, setReplayed] = useState({});
  const replay = (t) => async () => {
    const acted = await api(`/v1/admin/turns/${seg(t.turn_id)}/replay`, { method: 'POST' });
    setReplayed((r) => ({ ...r, [t.turn_id]: acted.replay.turn_id }));
  };
  return (
    <section id="dead-letters-page">
      <h1>Dead letters</h1>
      <p><a id="bulk-replay-dead" href={href('/jobs', { dead_lettered: 'true', action: 'replay' })}>Replay them all as a job…</a></p>
      <ErrorBox error={dl.error} />
      {dl.data ? (
        <>
          <TurnsTable id="dead-letters" turns={dl.data.turns} extra={(t) => (replayed[t.turn_id]
            ? <span className="replayed">replayed as <TurnLink id={replayed[t.turn_id]} /></span>
            : <Action className="replay-one" label="Replay" act={replay(t)} />)} />
          <div className="pager">
            {cursor ? <button type="button" onClick={() => go('/dead-letters')}>Newest</button> : null}
            <button type="button" disabled={!dl.data.next_cursor} onClick={() => go('/dead-letters', { cursor: dl.data.next_cursor })}>Older</button>
          </div>
        </>
      ) : null}
    </section>
  );
}

// jobFilter turns the console's filter (query strings) into a job's stored filter.
function jobFilter(f) {
  const out = {};
  for (const [k, v] of Object.entries(f)) {
    if (!v) continue;
    if (k === 'status') out.status = v.split(',');
    else if (k === 'dead_lettered') out.dead_lettered = v === 'true';
    else out[k] = v;
  }
  return out;
}

function NewJob({ initial, action: initialAction, onCreated }) {
  const [name, setName] = useState('');
  const [action, setAction] = useState(initialAction === 'replay' ? 'replay' : 'cancel');
  const [f, setF] = useState(initial);
  const [preview, setPreview] = useState(null);
  const [error, setError] = useState(null);
  const set = (k) => (e) => {
    setPreview(null);
    setF({ ...f, [k]: e.target.type === 'checkbox' ? (e.target.checked ? 'true' : '') : e.target.value });
  };
  const count = async () => {
    setError(null);
    try {
      const p = await api(`/v1/admin/turns${query({ ...f, limit: 1, counts: 'true' })}`);
      const live = (p.counts.queued || 0) + (p.counts.running || 0);
      const total = Object.values(p.counts).reduce((a, b) => a + b, 0);
      setPreview(action === 'cancel' ? live : total - live);
    } catch (e) {
      setError(e);
    }
  };
  const create = async (e) => {
    e.preventDefault();
    setError(null);
    try {
      const j = await api('/v1/admin/jobs', { method: 'POST', body: { name, action, filter: jobFilter(f) } });
      onCreated(j);
      setName('');
      setPreview(null);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form id="new-job" className="panel inline" onSubmit={create}>
      <h2>New bulk job</h2>
      <label>Name<input id="job-name" required pattern="[A-Za-z0-9._:\-]{1,128}" value={name} onChange={(e) => setName(e.target.value)} /></label>
      <label>Action
        <select id="job-action" value={action} onChange={(e) => { setAction(e.target.value); setPreview(null); }}>
          <option value="cancel">cancel live turns</option>
          <option value="replay">replay ended turns</option>
        </select>
      </label>
      {FILTERS.filter((k) => k !== 'dead_lettered').map((k) => (
        <label key={k}>{k.replace('_', ' ')}<input id={`job-${k}`} value={f[k] || ''} onChange={set(k)} placeholder={k === 'status' ? 'queued,running' : ''} /></label>
      ))}
      <label className="check"><input id="job-dead" type="checkbox" checked={f.dead_lettered === 'true'} onChange={set('dead_lettered')} />dead letters only</label>
      <button type="button" id="job-preview" onClick={count}>Count</button>
      {preview !== null ? <span id="job-preview-count">{preview} turn(s) to {action}</span> : null}
      <button type="submit" id="job-create">Start job</button>
      <ErrorBox error={error} />
    </form>
  );
}

// JobsPage: the bulk jobs with their progress (polled while any runs), a form for a new one (its
// filter prefilled from the link that opened the page), and each running job's cancel.
export function JobsPage({ params }) {
  const [fast, setFast] = useState(true);
  const jobs = useLoad(async () => {
    const l = await api('/v1/admin/jobs?limit=100');
    setFast(l.jobs.some((j) => j.state === 'running' || j.state === 'cancelling'));
    return l;
  }, [], fast ? 1000 : 5000);
  return (
    <section id="jobs-page">
      <h1>Bulk jobs</h1>
      <NewJob initial={filterOf(params)} action={params.get('action')} onCreated={jobs.reload} />
      <ErrorBox error={jobs.error} />
      {jobs.data ? (
        <table id="jobs" className="grid">
          <thead><tr><th>Name</th><th>Action</th><th>Filter</th><th>State</th><th>Progress</th><th>Runs</th><th>Created</th><th /></tr></thead>
          <tbody>
            {jobs.data.jobs.map((j) => (
              <tr key={j.job_id} data-job={j.name} data-state={j.state} data-done={j.done} data-failed={j.failed} data-total={j.total}>
                <td>{j.name}</td><td>{j.action}</td><td><code>{JSON.stringify(j.filter)}</code>{j.scope ? <span className="muted"> (tenant {j.scope})</span> : null}</td>
                <td><Status status={j.state} /></td>
                <td><progress max={j.total || 1} value={j.total ? j.done + j.failed : 1} /> <span className="progress-text">{j.done + j.failed}/{j.total}{j.failed ? ` (${j.failed} failed)` : ''}</span></td>
                <td className="num">{j.runs}</td><td><Time at={j.created_at} /></td>
                <td>{j.state === 'running' ? <Action className="job-cancel" label="Cancel" act={async () => { await api(`/v1/admin/jobs/${seg(j.job_id)}/cancel`, { method: 'POST' }); jobs.reload(); }} /> : null}</td>
              </tr>
            ))}
            {jobs.data.jobs.length === 0 ? <tr className="empty"><td colSpan={8}>No jobs.</td></tr> : null}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}

// AuditPage: every admin action, newest first, filtered by action.
export function AuditPage({ params }) {
  const action = params.get('action') || '';
  const cursor = params.get('cursor') || '';
  const a = useLoad(() => api(`/v1/admin/audit${query({ action, cursor, limit: 100 })}`), [action, cursor]);
  const [act, setAct] = useState(action);
  return (
    <section id="audit-page">
      <h1>Audit log</h1>
      <form className="filters" onSubmit={(e) => { e.preventDefault(); go('/audit', { action: act }); }}>
        <label>Action<input id="audit-action" placeholder="turn.replay" value={act} onChange={(e) => setAct(e.target.value)} /></label>
        <button type="submit">Filter</button>
      </form>
      <ErrorBox error={a.error} />
      {a.data ? (
        <>
          <table id="audit" className="grid">
            <thead><tr><th>When</th><th>Key</th><th>Tenant</th><th>Action</th><th>Target</th><th>Filter</th><th>Outcome</th><th>Detail</th></tr></thead>
            <tbody>
              {a.data.entries.map((e) => (
                <tr key={e.id} data-action={e.action} data-outcome={e.outcome}>
                  <td><Time at={e.at} /></td><td><code>{e.key_id}</code></td><td>{e.tenant}</td><td>{e.action}</td>
                  <td>{e.target && e.action.startsWith('turn.') ? <TurnLink id={e.target} /> : e.target}</td>
                  <td>{e.filter ? <code>{JSON.stringify(e.filter)}</code> : null}</td><td>{e.outcome}</td><td>{e.detail}</td>
                </tr>
              ))}
              {a.data.entries.length === 0 ? <tr className="empty"><td colSpan={8}>No entries.</td></tr> : null}
            </tbody>
          </table>
          <div className="pager">
            {cursor ? <button type="button" onClick={() => go('/audit', { action })}>Newest</button> : null}
            <button type="button" disabled={!a.data.next_cursor} onClick={() => go('/audit', { action, cursor: a.data.next_cursor })}>Older</button>
          </div>
        </>
      ) : null}
    </section>
  );
}
