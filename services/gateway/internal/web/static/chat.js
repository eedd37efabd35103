(function () {
  "use strict";
  var params = new URLSearchParams(location.search);
  var session = params.get("session");
  var fresh = !session;
  if (fresh) {
    // The session goes into the address, so a reload (or a bookmark) comes back to it.
    session = "demo-" + Math.random().toString(36).slice(2, 10);
    params.set("session", session);
    history.replaceState(null, "", location.pathname + "?" + params.toString());
  }
  var knobs = {};
  if (params.get("tokens")) knobs.tokens = parseInt(params.get("tokens"), 10);
  if (params.get("duration_ms")) knobs.duration_ms = parseInt(params.get("duration_ms"), 10);
  var log = document.getElementById("log");
  var conn = document.getElementById("conn");
  document.getElementById("session").textContent = session;

  // What the page saw, for tests and for the curious: every event id, and each turn's reply.
  var seen = window.__turnstile = { ids: [], turns: {}, states: [] };
  var bubbles = {};
  // mine maps a turn to the element showing the user's message; sending holds the messages this
  // page posted whose turn ID has not come back yet.
  var mine = {};
  var sending = [];
  var sessionPath = "/v1/sessions/" + encodeURIComponent(session);

  function bubble(turnId) {
    if (!bubbles[turnId]) {
      var div = document.createElement("div");
      div.className = "msg agent";
      div.dataset.turn = turnId;
      var text = document.createElement("span");
      text.className = "text";
      var status = document.createElement("span");
      status.className = "status";
      div.appendChild(text);
      div.appendChild(status);
      log.appendChild(div);
      bubbles[turnId] = { div: div, text: text, status: status };
      seen.turns[turnId] = { text: "", status: "queued", deltas: [] };
    }
    return bubbles[turnId];
  }

  function userMessage(text) {
    var div = document.createElement("div");
    div.className = "msg user";
    div.textContent = text;
    return div;
  }

  // showInput puts a turn's input just before its reply, once: from the session's turns after a
  // reload, or from the turn itself when its events arrive first.
  function showInput(turnId, input) {
    if (mine[turnId] || !input || !input.text) return;
    var el = null;
    for (var i = 0; i < sending.length; i++) {
      if (sending[i].textContent === input.text) {
        el = sending.splice(i, 1)[0];
        break;
      }
    }
    if (!el) {
      el = userMessage(input.text);
      log.insertBefore(el, bubble(turnId).div);
    }
    el.dataset.turn = turnId;
    mine[turnId] = el;
  }

  var asked = {};
  function lookUpInput(turnId) {
    if (mine[turnId] || asked[turnId]) return;
    asked[turnId] = true;
    fetch("/v1/turns/" + encodeURIComponent(turnId)).then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (t) {
      if (t) showInput(turnId, t.input);
    }).catch(function () {});
  }

  var statusOf = { queued: "queued", running: "running", succeeded: "completed", failed: "failed", cancelled: "cancelled", expired: "expired" };

  function setStatus(turnId, status) {
    var b = bubble(turnId);
    seen.turns[turnId].status = status;
    b.status.textContent = status;
    b.status.className = "status " + status;
    b.div.dataset.status = status;
  }

  var stream = new Turnstile.SessionStream(session, {
    onState: function (s) {
      seen.states.push(s);
      conn.textContent = s === "live" ? "live" : s === "closed" ? "closed" : s + "…";
      conn.className = "conn " + s;
    },
    onEvent: function (name, d, id) {
      if (id) seen.ids.push(id);
      if (name === "stream.reset") {
        var note = document.createElement("div");
        note.className = "msg agent";
        note.textContent = "(stream reset: " + (d && d.reason) + ")";
        log.appendChild(note);
        return;
      }
      if (!d || !d.turn_id) return;
      var b = bubble(d.turn_id);
      if (!mine[d.turn_id] && !sending.length) lookUpInput(d.turn_id);
      var t = seen.turns[d.turn_id];
      switch (name) {
        case "turn.started": setStatus(d.turn_id, "running"); break;
        case "turn.retrying": setStatus(d.turn_id, "retrying"); b.text.textContent = ""; t.text = ""; break;
        case "turn.delta":
          t.deltas.push(d.index);
          t.text += d.text;
          b.text.textContent = t.text;
          break;
        case "turn.completed": setStatus(d.turn_id, "completed"); break;
        case "turn.failed": setStatus(d.turn_id, "failed"); break;
        case "turn.cancelled": setStatus(d.turn_id, "cancelled"); break;
        case "turn.expired": setStatus(d.turn_id, "expired"); break;
      }
      log.scrollTop = log.scrollHeight;
    }
  });

  // The session's earlier turns (newest first in the API) show the user's messages after a reload;
  // their replies come from the stream, which starts at the session's oldest retained event. A
  // session this page just minted has none to ask for.
  var earlier = fresh ? Promise.resolve({ turns: [] }) : fetch(sessionPath + "/turns?limit=100").then(function (r) {
    return r.ok ? r.json() : { turns: [] };
  });
  earlier.then(function (page) {
    page.turns.slice().reverse().forEach(function (t) {
      bubble(t.turn_id);
      showInput(t.turn_id, t.input);
      if (statusOf[t.status]) setStatus(t.turn_id, statusOf[t.status]);
    });
  }).catch(function () {}).then(function () { stream.open(); });

  document.getElementById("composer").addEventListener("submit", function (e) {
    e.preventDefault();
    var input = document.getElementById("text");
    var text = input.value.trim();
    if (!text) return;
    input.value = "";
    var own = userMessage(text);
    log.appendChild(own);
    sending.push(own);
    var body = { input: { text: text } };
    if (Object.keys(knobs).length) body.metadata = { demo: knobs };
    fetch(sessionPath + "/turns", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (j) { return { status: r.status, body: j }; });
    }).then(function (res) {
      var at = sending.indexOf(own);
      if (at >= 0) sending.splice(at, 1);
      if (res.status !== 202) {
        own.textContent += "  (refused: " + (res.body.title || res.status) + ")";
        return;
      }
      if (!mine[res.body.turn_id]) {
        own.dataset.turn = res.body.turn_id;
        mine[res.body.turn_id] = own;
      }
      bubble(res.body.turn_id);
      if (seen.turns[res.body.turn_id].status === "queued") setStatus(res.body.turn_id, "queued");
      stream.setToken(res.body.stream_token);
    }).catch(function (err) {
      var at = sending.indexOf(own);
      if (at >= 0) sending.splice(at, 1);
      own.textContent += "  (not sent: " + err + ")";
    });
  });
})();
