// The admin API client: every request carries the API key the operator pasted, kept in this
// tab's sessionStorage (gone when the tab closes, never sent anywhere but this origin).
const KEY = 'turnstile.apiKey';

export function getKey() {
  return sessionStorage.getItem(KEY) || '';
}

// keyChosen is whether the operator has pasted a key or chosen to go on without one (for an
// installation with TURNSTILE_AUTH=off): until then the console sends no request, so it never
// collects a 401 for want of asking.
export function keyChosen() {
  return sessionStorage.getItem(KEY) !== null;
}

// setKey keeps k ('' for "no key"); forgetKey returns to the question.
export function setKey(k) {
  sessionStorage.setItem(KEY, k);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY);
}

// ApiError is a refused request: its status and the problem document's title and detail.
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

export async function api(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json' };
  const key = getKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = { detail: text };
  }
  if (!res.ok) throw new ApiError(res.status, data || {});
  return data;
}

// query renders an object of strings as a query string, leaving out empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== undefined && v !== null && v !== false) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export const seg = encodeURIComponent;
