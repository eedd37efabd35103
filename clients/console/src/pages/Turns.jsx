import { useState } from 'react';
import { api, query } from '../api.js';
import { ErrorBox, TurnsTable, useLoad } from '../components.jsx';
import { go, href } from '../router.js';

// The filter fields of a search, in the admin API's query names (GET /v1/admin/turns).
export const FILTERS = ['status', 'tenant', 'agent', 'session_id', 'accepted_after', 'accepted_before', 'error', 'dead_lettered'];
const STATUSES = ['', 'queued', 'running', 'succeeded', 'failed', 'cancelled', 'expired'];

export function filterOf(params) {
  const f = {};
  for (const k of FILTERS) if (params.get(k)) f[k] = params.get(k);
  return f;
}

// toLocalInput and fromLocalInput move a time between RFC 3339 and a datetime-local field.
function toLocalInput(v) {
  if (!v) return '';
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
function fromLocalInput(v) {
  return v ? new Date(v).toISOString() : '';
}

export function FilterForm({ filter, onApply }) {
  const [f, setF] = useState(filter);
  const set = (k) => (e) => setF({ ...f, [k]: e.target.type === 'checkbox' ? (e.target.checked ? 'true' : '') : e.target.value });
  const submit = (e) => {
    e.preventDefault();
    onApply(Object.fromEntries(Object.entries(f).filter(([, v]) => v)));
  };
  return (
    <form id="filters" className="filters" onSubmit={submit}>
      <label>Status
        <select id="filter-status" value={f.status || ''} onChange={set('status')}>
          {STATUSES.map((s) => <option key={s} value={s}>{s || 'any'}</option>)}
        </select>
      </label>
      <label>Tenant<input id="filter-tenant" value={f.tenant || ''} onChange={set('tenant')} /></label>
      <label>Agent<input id="filter-agent" value={f.agent || ''} onChange={set('agent')} /></label>
      <label>Session<input id="filter-session" value={f.session_id || ''} onChange={set('session_id')} /></label>
      <label>Accepted after<input id="filter-after" type="datetime-local" value={toLocalInput(f.accepted_after)} onChange={(e) => setF({ ...f, accepted_after: fromLocalInput(e.target.value) })} /></label>
      <label>Accepted before<input id="filter-before" type="datetime-local" value={toLocalInput(f.accepted_before)} onChange={(e) => setF({ ...f, accepted_before: fromLocalInput(e.target.value) })} /></label>
      <label>Error contains<input id="filter-error" value={f.error || ''} onChange={set('error')} /></label>
      <label className="check"><input id="filter-dead" type="checkbox" checked={f.dead_lettered === 'true'} onChange={set('dead_lettered')} />dead letters only</label>
      <button id="filter-apply" type="submit">Search</button>
      <button type="button" onClick={() => { setF({}); onApply({}); }}>Clear</button>
    </form>
  );
}

// TurnsPage: the search with its filters in the URL, counts by status, and cursor paging (the
// cursors of the pages before this one are kept in the URL too, '-' naming the first page, so a
// reload, the browser's Back and Newer all work).
export function TurnsPage({ params }) {
  const filter = filterOf(params);
  const cursor = params.get('cursor') || '';
  const back = params.get('back') ? params.get('back').split(' ') : [];
  const limit = params.get('limit') || '25';
  const key = JSON.stringify([filter, cursor, limit]);
  // The answer carries the key it was asked for, so the page can say when it shows this one.
  const page = useLoad(async () => ({ key, ...(await api(`/v1/admin/turns${query({ ...filter, cursor, limit, counts: 'true' })}`)) }), [key]);
  const apply = (f) => go('/turns', f);
  const move = (nextCursor, nextBack) => go('/turns', { ...filter, limit: params.get('limit') || '', cursor: nextCursor, back: nextBack.join(' ') });
  const d = page.data;
  return (
    <section id="turns-page" data-loaded={d && d.key === key && !page.loading ? 'yes' : 'no'}>
      <h1>Turns</h1>
      <FilterForm key={JSON.stringify(filter)} filter={filter} onApply={apply} />
      <ErrorBox error={page.error} />
      {d ? (
        <>
          <p className="counts">
            <a id="bulk-from-filter" href={href('/jobs', filter)}>Cancel or replay these as a bulk job…</a>
          </p>
          <p id="counts" className="counts">
            {Object.keys(d.counts || {}).length === 0 ? 'No turns match.' : Object.entries(d.counts).sort().map(([s, n]) => <span key={s} data-status={s}>{s}: <b>{n}</b></span>)}
          </p>
          <TurnsTable id="turns" turns={d.turns} />
          <div className="pager">
            <button type="button" id="page-newer" disabled={back.length === 0} onClick={() => move(back[back.length - 1] === '-' ? '' : back[back.length - 1], back.slice(0, -1))}>Newer</button>
            <button type="button" id="page-older" disabled={!d.next_cursor} onClick={() => move(d.next_cursor, [...back, cursor || '-'])}>Older</button>
            {page.loading ? <span className="muted">loading…</span> : null}
          </div>
        </>
      ) : null}
    </section>
  );
}
