import { useState } from 'react';
import { forgetKey, getKey, keyChosen, setKey } from './api.js';
import { href, useRoute } from './router.js';
import { TurnsPage } from './pages/Turns.jsx';
import { TurnPage } from './pages/Turn.jsx';
import { AuditPage, BacklogPage, DeadLettersPage, JobsPage, SessionPage, WorkersPage } from './pages/Ops.jsx';

const NAV = [
  ['/turns', 'Turns'],
  ['/backlog', 'Backlog'],
  ['/workers', 'Workers'],
  ['/dead-letters', 'Dead letters'],
  ['/jobs', 'Bulk jobs'],
  ['/audit', 'Audit log'],
];

// KeyForm holds the API key (an admin's or a tenant's) in this tab's sessionStorage; every
// request of the console sends it. Changing it re-renders every page under the new key.
function KeyForm({ onChange }) {
  const [value, setValue] = useState('');
  const has = Boolean(getKey());
  const save = (e) => {
    e.preventDefault();
    setKey(value.trim());
    setValue('');
    onChange();
  };
  return (
    <form id="key-form" className="key" onSubmit={save}>
      <span id="key-state" className={has ? 'ok' : 'muted'}>{has ? 'API key set' : 'no API key'}</span>
      <input id="api-key" type="password" autoComplete="off" placeholder="paste an API key" value={value} onChange={(e) => setValue(e.target.value)} />
      <button id="key-save" type="submit">Use key</button>
      {keyChosen() ? <button id="key-clear" type="button" onClick={() => { forgetKey(); onChange(); }}>Forget</button> : null}
    </form>
  );
}

function Page({ route }) {
  const [head, ...rest] = route.parts;
  switch (head) {
    case 'turn':
      return <TurnPage key={rest[0]} id={rest[0]} />;
    case 'session':
      return <SessionPage key={rest.join('/')} tenant={rest[0]} session={rest[1]} />;
    case 'backlog':
      return <BacklogPage />;
    case 'workers':
      return <WorkersPage />;
    case 'dead-letters':
      return <DeadLettersPage params={route.params} />;
    case 'jobs':
      return <JobsPage key={route.params.toString()} params={route.params} />;
    case 'audit':
      return <AuditPage params={route.params} />;
    default:
      return <TurnsPage params={route.params} />;
  }
}

export function App() {
  const route = useRoute();
  const [gen, setGen] = useState(0);
  const section = `/${route.parts[0] || 'turns'}`;
  return (
    <>
      <header>
        <a className="brand" href={href('/turns')}>turnstile</a>
        <nav>
          {NAV.map(([p, label]) => (
            <a key={p} id={`nav-${p.slice(1)}`} className={section === p ? 'on' : ''} href={href(p)}>{label}</a>
          ))}
        </nav>
        <KeyForm onChange={() => setGen((g) => g + 1)} />
      </header>
      <main key={gen}>
        {keyChosen() ? <Page route={route} /> : (
          <div id="need-key" className="panel">
            <h1>API key</h1>
            <p>Paste an API key above: an admin key sees every tenant, a tenant&apos;s key only its own tenant.
              It is kept in this tab only (sessionStorage) and sent with every request of the console.</p>
            <button id="no-key" type="button" onClick={() => { setKey(''); setGen((g) => g + 1); }}>Go on without a key (TURNSTILE_AUTH=off)</button>
          </div>
        )}
      </main>
    </>
  );
}
