(function () {
  "use strict";
  var params = new URLSearchParams(location.search);
  var session = params.get("session") || ("demo-" + Math.random().toString(36).slice(2, 10));
  var knobs = {};
  if (params.get("tokens")) knobs.tokens = parseInt(params.get("tokens"), 10);
  if (params.get("duration_ms")) knobs.duration_ms = parseInt(params.get("duration_ms"), 10);
  var log = document.getElementById("log");
  var conn = document.getElementById("conn");
  document.getElementById("session").textContent = session;

  // What the page saw, for tests and for the curious: every event id, and each turn's reply.
  var seen = window.__turnstile = { ids: [], turns: {}, states: [] };
  var bubbles = {};

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
  stream.open();

  document.getElementById("composer").addEventListener("submit", function (e) {
    e.preventDefault();
    var input = document.getElementById("text");
    var text = input.value.trim();
    if (!text) return;
    input.value = "";
    var mine = document.createElement("div");
    mine.className = "msg user";
    mine.textContent = text;
    log.appendChild(mine);
    var body = { input: { text: text } };
    if (Object.keys(knobs).length) body.metadata = { demo: knobs };
    fetch("/v1/sessions/" + encodeURIComponent(session) + "/turns", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body)
    }).then(function (r) {
      return r.json().then(function (j) { return { status: r.status, body: j }; });
    }).then(function (res) {
      if (res.status !== 202) {
        mine.textContent += "  (refused: " + (res.body.title || res.status) + ")";
        return;
      }
      bubble(res.body.turn_id);
      if (seen.turns[res.body.turn_id].status === "queued") setStatus(res.body.turn_id, "queued");
      stream.setToken(res.body.stream_token);
    }).catch(function (err) {
      mine.textContent += "  (not sent: " + err + ")";
    });
  });
})();
