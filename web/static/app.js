// gpuportal's small script (no inline scripts: the CSP forbids them).

// Send the CSRF token with every htmx request.
document.addEventListener("htmx:configRequest", function (evt) {
  var meta = document.querySelector('meta[name="csrf-token"]');
  if (meta) { evt.detail.headers["X-CSRF-Token"] = meta.content; }
});

// Calendar: the first click on an hour picks the start, the second the last
// hour; the quote form then asks the server for a quote (htmx, on change).
(function () {
  function form() { return document.getElementById("quote-form"); }

  function highlight() {
    var f = form();
    if (!f) { return; }
    var start = f.elements.start.value, end = f.elements.end.value;
    document.querySelectorAll("td.slot[data-local]").forEach(function (td) {
      var on = start && (end ? td.dataset.local >= start && td.dataset.local < end : td.dataset.local === start);
      td.classList.toggle("selected", !!on);
    });
  }

  document.addEventListener("click", function (evt) {
    var td = evt.target.closest("td.slot[data-local]");
    var f = form();
    if (!td || !f || td.dataset.bookable !== "true") { return; }
    // Stateless, since htmx replaces the form after each change: with a
    // start and no end, a later hour is the end; otherwise a new start.
    var start = f.elements.start, end = f.elements.end;
    if (start.value && !end.value && td.dataset.local >= start.value) {
      end.value = td.dataset.localEnd;
    } else {
      start.value = td.dataset.local;
      end.value = "";
    }
    highlight();
    // The form may have been swapped in a moment ago, before htmx wired
    // its trigger (it does so as the swap settles): wire it now, or a
    // quick second click would ask for no quote.
    if (window.htmx) { window.htmx.process(f); }
    start.dispatchEvent(new Event("change", { bubbles: true }));
  });

  document.addEventListener("htmx:afterSwap", highlight);
  document.addEventListener("DOMContentLoaded", highlight);
})();

// Interruption countdowns tick every second between the list's refreshes
// (counting from the seconds left that the server rendered, so they follow
// the portal's clock, not the browser's).
setInterval(function () {
  document.querySelectorAll(".countdown[data-left]").forEach(function (el) {
    var left = Math.max(0, parseInt(el.dataset.left, 10) - 1);
    el.dataset.left = String(left);
    el.textContent = el.textContent.replace(/\d+ s/, left + " s");
  });
}, 1000);

// Destructive forms carry data-confirm: the browser asks before sending.
document.addEventListener("submit", function (evt) {
  var f = evt.target.closest("form[data-confirm]");
  if (f && !window.confirm(f.dataset.confirm)) { evt.preventDefault(); }
}, true);

// Forms marked data-swap-errors show the problems the server answers with
// (a 4xx fragment) where the answer would go; htmx leaves 4xx unswapped
// otherwise.
document.addEventListener("htmx:beforeSwap", function (evt) {
  var status = evt.detail.xhr.status;
  var elt = evt.detail.requestConfig && evt.detail.requestConfig.elt;
  if (status >= 400 && status < 500 && elt && elt.closest("[data-swap-errors]")) {
    evt.detail.shouldSwap = true;
    evt.detail.isError = false;
  }
});

// Copy buttons: data-copy names the element whose text goes to the
// clipboard; the button says so for a moment.
document.addEventListener("click", function (evt) {
  var btn = evt.target.closest("[data-copy]");
  if (!btn) { return; }
  var src = document.querySelector(btn.dataset.copy);
  if (!src || !navigator.clipboard) { return; }
  navigator.clipboard.writeText(src.textContent.trim()).then(function () {
    var label = btn.textContent;
    btn.textContent = btn.dataset.copied || label;
    setTimeout(function () { btn.textContent = label; }, 2000);
  });
});
