import { useEffect, useState } from 'react';

// The console's routes live in the URL fragment (#/turns?status=failed), so intake serves one
// document and a reload or a shared link opens the same view.
export function parseHash(hash) {
  const h = (hash || '').replace(/^#/, '') || '/turns';
  const i = h.indexOf('?');
  const path = i < 0 ? h : h.slice(0, i);
  const params = new URLSearchParams(i < 0 ? '' : h.slice(i + 1));
  return { path, parts: path.split('/').filter(Boolean).map(decodeURIComponent), params };
}

export function href(path, params) {
  const q = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== '' && v != null)).toString() : '';
  return `#${path}${q ? `?${q}` : ''}`;
}

export function go(path, params) {
  window.location.hash = href(path, params);
}

export function useRoute() {
  const [route, setRoute] = useState(() => parseHash(window.location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(window.location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}
