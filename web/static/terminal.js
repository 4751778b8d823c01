// The web terminal: xterm.js joined to the instance's shell over a
// same-origin WebSocket. Binary frames carry the terminal's bytes both
// ways; text frames carry JSON control ({"resize":{"cols","rows"}} from
// here, {"exit":N} or {"error":"…"} from the portal).
(function () {
  "use strict";
  var box = document.getElementById("terminal");
  if (!box || typeof Terminal === "undefined") return;
  var status = document.getElementById("terminal-status");
  var term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000 });
  var fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  box.dataset.size = term.rows + " " + term.cols;
  var scheme = location.protocol === "https:" ? "wss://" : "ws://";
  var url = scheme + location.host + box.dataset.ws + "?cols=" + term.cols + "&rows=" + term.rows;
  var ws = new WebSocket(url);
  ws.binaryType = "arraybuffer";
  var enc = new TextEncoder();
  var connected = false;
  ws.onmessage = function (ev) {
    if (typeof ev.data === "string") {
      var m = JSON.parse(ev.data);
      if (m.error) status.textContent = m.error;
      if (m.exit !== undefined) status.textContent = box.dataset.ended.replace("{code}", m.exit);
      box.dataset.state = "ended";
      return;
    }
    if (!connected) {
      connected = true;
      status.textContent = box.dataset.connected;
      box.dataset.state = "connected";
    }
    term.write(new Uint8Array(ev.data));
  };
  ws.onclose = function () {
    if (box.dataset.state !== "ended") box.dataset.state = "closed";
  };
  term.onData(function (d) {
    if (ws.readyState === WebSocket.OPEN) ws.send(enc.encode(d));
  });
  term.onResize(function (size) {
    box.dataset.size = size.rows + " " + size.cols;
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ resize: { cols: size.cols, rows: size.rows } }));
  });
  window.addEventListener("resize", function () { fit.fit(); });
  term.focus();
})();
