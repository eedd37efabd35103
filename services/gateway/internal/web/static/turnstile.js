// turnstile.js: follow a turnstile session's event stream from a browser.
//
// It wraps EventSource. The browser reconnects by itself after a clean close (sending
// Last-Event-ID), but gives up for good after a non-200 answer or some network failures; then
// this helper builds a new EventSource with ?last_event_id=<last id seen>, after a jittered
// backoff, so the session is followed until close() is called.
(function (global) {
  "use strict";
  var EVENTS = ["turn.started", "turn.delta", "turn.tool_call", "turn.tool_result", "turn.completed",
    "turn.failed", "turn.cancelled", "turn.expired", "turn.retrying", "turn.waiting", "stream.reset",
    "stream.revoked"];

  function SessionStream(sessionId, opts) {
    opts = opts || {};
    this.sessionId = sessionId;
    this.base = opts.base || "";
    this.token = opts.token || "";
    this.lastEventId = opts.lastEventId || "";
    this.onEvent = opts.onEvent || function () {};
    this.onState = opts.onState || function () {};
    this.es = null;
    this.closed = false;
    this.failures = 0;
    this.opens = 0;
    this.timer = null;
  }

  SessionStream.prototype.url = function () {
    var q = [];
    if (this.lastEventId) q.push("last_event_id=" + encodeURIComponent(this.lastEventId));
    if (this.token) q.push("access_token=" + encodeURIComponent(this.token));
    return this.base + "/v1/sessions/" + encodeURIComponent(this.sessionId) + "/events" + (q.length ? "?" + q.join("&") : "");
  };

  SessionStream.prototype.open = function () {
    var self = this;
    if (self.closed) return;
    if (self.es) self.es.close();
    self.onState(self.opens ? "reconnecting" : "connecting");
    var es = new EventSource(self.url());
    self.es = es;
    es.onopen = function () {
      self.opens++;
      self.failures = 0;
      self.onState("live");
    };
    es.onerror = function () {
      if (self.es !== es) return;
      if (es.readyState === EventSource.CLOSED) {
        // The browser gave up: rebuild, resuming from the last event seen.
        self.failures++;
        self.onState("reconnecting");
        var delay = Math.min(30000, 500 * Math.pow(2, Math.min(self.failures, 6)));
        delay = delay / 2 + Math.random() * delay;
        self.timer = setTimeout(function () { self.open(); }, delay);
      } else {
        self.onState("reconnecting");
      }
    };
    EVENTS.forEach(function (name) {
      es.addEventListener(name, function (e) {
        if (e.lastEventId) self.lastEventId = e.lastEventId;
        var data = null;
        try { data = JSON.parse(e.data); } catch (err) { data = e.data; }
        self.onEvent(name, data, e.lastEventId);
        if (name === "stream.revoked" && self.es === es) {
          // The token's API key was revoked: reconnecting with it is refused, so stop until
          // setToken brings another.
          es.close();
          self.es = null;
          self.onState("revoked");
        }
      });
    });
  };

  // setToken keeps the newest stream token (from a 202). A working stream is left alone; one
  // that is not open (for example refused for want of a token) is rebuilt with it at once.
  SessionStream.prototype.setToken = function (token) {
    if (!token || token === this.token) return;
    this.token = token;
    if (this.es && this.es.readyState === EventSource.OPEN) return;
    if (this.timer) clearTimeout(this.timer);
    this.open();
  };

  SessionStream.prototype.close = function () {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.es) this.es.close();
    this.onState("closed");
  };

  global.Turnstile = { SessionStream: SessionStream };
})(window);
