// gpuportal's small script (no inline scripts: the CSP forbids them).

// Send the CSRF token with every htmx request.
document.addEventListener("htmx:configRequest", function (evt) {
  var meta = document.querySelector('meta[name="csrf-token"]');
  if (meta) { evt.detail.headers["X-CSRF-Token"] = meta.content; }
});

// Calendar: the first click (or Enter/Space) on an hour picks the start,
// the second the last hour; the quote form then asks the server for a
// quote (htmx, on change). The grid is one tab stop: arrow keys move
// between hours, Home/End to the ends of a day's row, Escape clears.
(function () {
  function form() { return document.getElementById("quote-form"); }
  function cells() { return Array.from(document.querySelectorAll('table.calendar td[role="gridcell"][data-local]')); }
  function pad(h) { return ("0" + h).slice(-2); }

  // The form's start or end as "2006-01-02T15:04", from its date and hour
  // fields (get reads a field by name).
  function composed(get, name) {
    var d = get(name + "_date"), h = get(name + "_hour");
    if (d === undefined && h === undefined) { return get(name) || ""; }
    return d && h !== "" && h !== undefined ? d + "T" + pad(h) + ":00" : "";
  }
  function fromForm(f) { return function (n) { return f.elements[n] ? f.elements[n].value : undefined; }; }

  // set puts a "2006-01-02T15:04" value into the hidden field and the
  // date and hour fields.
  function set(f, name, value) {
    f.elements[name].value = value;
    f.elements[name + "_date"].value = value ? value.slice(0, 10) : "";
    f.elements[name + "_hour"].value = value ? String(parseInt(value.slice(11, 13), 10)) : "";
  }

  function highlight() {
    var f = form();
    if (!f) { return; }
    var start = f.elements.start.value, end = f.elements.end.value;
    cells().forEach(function (td) {
      var on = start && (end ? td.dataset.local >= start && td.dataset.local < end : td.dataset.local === start);
      td.classList.toggle("selected", !!on);
      td.setAttribute("aria-selected", on ? "true" : "false");
    });
  }

  // roving keeps exactly one cell in the tab order: the focused one, else
  // the selection's start, else the first bookable hour.
  function roving(focus) {
    var all = cells();
    if (!all.length) { return; }
    var current = all.find(function (td) { return td.tabIndex === 0; }) ||
      all.find(function (td) { return td.classList.contains("selected"); }) ||
      all.find(function (td) { return td.dataset.bookable === "true"; }) || all[0];
    all.forEach(function (td) { td.tabIndex = td === current ? 0 : -1; });
    if (focus) { current.focus(); }
  }

  function moveTo(td) {
    if (!td || td.getAttribute("role") !== "gridcell" || !td.dataset.local) { return; }
    cells().forEach(function (c) { c.tabIndex = -1; });
    td.tabIndex = 0;
    td.focus();
  }

  function send(f) {
    // The form may have been swapped in a moment ago, before htmx wired
    // its trigger (it does so as the swap settles): wire it now, or a
    // quick second pick would ask for no quote.
    if (window.htmx) { window.htmx.process(f); }
    f.elements.start.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function pick(td) {
    var f = form();
    if (!td || !f || td.dataset.bookable !== "true") { return; }
    // Stateless, since htmx replaces the form after each change: with a
    // start and no end, a later hour is the end; otherwise a new start.
    var start = f.elements.start.value, end = f.elements.end.value;
    if (start && !end && td.dataset.local >= start) {
      set(f, "end", td.dataset.localEnd);
    } else {
      set(f, "start", td.dataset.local);
      set(f, "end", "");
    }
    highlight();
    showBar(f);
    send(f);
  }

  // The phone's quote bar says at once what a tap selected; the price
  // follows with the server's answer. Same text as selectionText (Go).
  function selectionText(start, end) {
    if (!start) { return ""; }
    var from = start.slice(5, 10) + " " + start.slice(11, 16);
    if (!end) { return from + " → …"; }
    if (end.slice(0, 10) === start.slice(0, 10)) { return from + "–" + end.slice(11, 16); }
    return from + " → " + end.slice(5, 10) + " " + end.slice(11, 16);
  }
  function showBar(f) {
    var bar = document.querySelector('[data-testid="quote-bar"]');
    if (!bar) { return; }
    var start = f.elements.start.value, end = f.elements.end.value;
    bar.hidden = !start;
    bar.querySelector(".quote-bar-when").textContent = selectionText(start, end);
    bar.querySelector(".quote-bar-total").textContent = "…";
  }

  document.addEventListener("click", function (evt) {
    var td = evt.target.closest("td.slot[data-local]");
    if (td) { moveTo(td); pick(td); }
  });

  document.addEventListener("keydown", function (evt) {
    var td = evt.target.closest && evt.target.closest('table.calendar td[role="gridcell"]');
    if (!td) { return; }
    var row = td.parentElement, col = Array.prototype.indexOf.call(row.children, td);
    var rows = Array.from(row.parentElement.children), r = rows.indexOf(row);
    var at = function (rr, cc) { return rows[rr] && rows[rr].children[cc]; };
    switch (evt.key) {
      case "ArrowUp": moveTo(at(r - 1, col)); break;
      case "ArrowDown": moveTo(at(r + 1, col)); break;
      case "ArrowLeft": moveTo(at(r, col - 1)); break;
      case "ArrowRight": moveTo(at(r, col + 1)); break;
      case "Home": moveTo(at(r, 1)); break;
      case "End": moveTo(at(r, row.children.length - 1)); break;
      case "Enter": case " ": pick(td); break;
      case "Escape":
        var f = form();
        if (f) { set(f, "start", ""); set(f, "end", ""); highlight(); send(f); }
        break;
      default: return;
    }
    evt.preventDefault();
  });

  // Quick picks can overtake each other on the way back: an answer for
  // hours that are no longer the form's is dropped.
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var f = form(), cfg = evt.detail.requestConfig;
    if (!f || !cfg || !cfg.elt || cfg.elt.id !== "quote-form" || !cfg.parameters) { return; }
    var p = cfg.parameters, sent = function (n) { return p[n]; }, now = fromForm(f);
    if (composed(sent, "start") !== composed(now, "start") || composed(sent, "end") !== composed(now, "end")) {
      evt.detail.shouldSwap = false;
    }
  });

  // Typed dates and hours: the hidden values follow, the selection shows,
  // and a start in another week moves the calendar there.
  document.addEventListener("change", function (evt) {
    var f = form();
    if (!f || !evt.target.name || !/^(start|end)_(date|hour)$/.test(evt.target.name) || !f.contains(evt.target)) { return; }
    var get = fromForm(f);
    f.elements.start.value = composed(get, "start");
    f.elements.end.value = composed(get, "end");
    highlight();
    var day = f.elements.start_date.value, grid = document.querySelector("table.calendar");
    if (day && grid && window.htmx && (day < grid.dataset.firstDay || day > grid.dataset.lastDay)) {
      var url = "/calendar/grid?model=" + encodeURIComponent(grid.dataset.model) + "&region=" + encodeURIComponent(grid.dataset.region) + "&week=" + day;
      window.htmx.ajax("GET", url, { target: "#grid" });
    }
  });

  // After a swap: the selection shows again, and focus that was in the
  // grid (a new week) stays there.
  var focusWasInGrid = false;
  document.addEventListener("htmx:beforeSwap", function () {
    focusWasInGrid = !!(document.activeElement && document.activeElement.closest && document.activeElement.closest("table.calendar"));
  });
  // The grid scrolls inside its box (24 hours are taller than a window):
  // bring the selection into view, or the hour now, not 0:00.
  function reveal() {
    var box = document.querySelector(".calendar-scroll"), grid = box && box.querySelector("table.calendar");
    if (!grid) { return; }
    var td = grid.querySelector("td.selected") || grid.querySelector('td[data-local="' + grid.dataset.now + '"]');
    if (!td) { return; }
    var head = grid.tHead ? grid.tHead.getBoundingClientRect().height : 0;
    var top = td.getBoundingClientRect().top - box.getBoundingClientRect().top;
    if (top < head || top + td.offsetHeight > box.clientHeight) {
      box.scrollTop += top - head - td.offsetHeight;
    }
  }

  document.addEventListener("htmx:afterSwap", function (evt) {
    highlight();
    roving(focusWasInGrid && !document.activeElement.closest("table.calendar"));
    if (evt.detail.target && evt.detail.target.id === "grid") { reveal(); }
  });
  document.addEventListener("DOMContentLoaded", function () { highlight(); roving(false); reveal(); });
})();

// Interruption countdowns tick every second between the list's refreshes
// (counting from the seconds left that the server rendered, so they follow
// the portal's clock, not the browser's).
// They read as people say it ("1 min 20 s", in the page's language: the
// formats come with the element) and say "now" once the time is up.
setInterval(function () {
  document.querySelectorAll(".countdown[data-left]").forEach(function (el) {
    var left = Math.max(0, parseInt(el.dataset.left, 10) - 1);
    el.dataset.left = String(left);
    var out = el.querySelector(".left");
    if (!out) {
      el.textContent = el.textContent.replace(/\d+ s/, left + " s");
    } else if (left === 0) {
      out.textContent = el.dataset.done || "0 s";
    } else if (left < 60 || !el.dataset.min) {
      out.textContent = (el.dataset.sec || "%d s").replace("%d", left);
    } else {
      out.textContent = el.dataset.min.replace("%d", Math.floor(left / 60)).replace("%d", left % 60);
    }
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

// Live lists (the instances) are swapped every few seconds: output panels
// the reader opened stay open.
(function () {
  var open = [];
  document.addEventListener("htmx:beforeSwap", function (evt) {
    if (evt.detail.target && evt.detail.target.id === "instance-list") {
      open = Array.from(evt.detail.target.querySelectorAll("details[id][open]")).map(function (d) { return d.id; });
    }
  });
  document.addEventListener("htmx:afterSwap", function (evt) {
    if (evt.detail.target && evt.detail.target.id === "instance-list") {
      open.forEach(function (id) { var d = document.getElementById(id); if (d) { d.open = true; } });
    }
  });
})();

// The phone navigation's Menu button opens and closes the page links.
document.addEventListener("click", function (evt) {
  var btn = evt.target.closest("[data-nav-toggle]");
  if (!btn) { return; }
  var header = btn.closest("header");
  var open = header.classList.toggle("nav-open");
  btn.setAttribute("aria-expanded", open ? "true" : "false");
});

// The navigation's dropdowns (admin, account) close on a click elsewhere
// and on Escape, as menus do.
document.addEventListener("click", function (evt) {
  document.querySelectorAll("header details.nav-menu[open]").forEach(function (d) {
    if (!d.contains(evt.target)) { d.open = false; }
  });
});
document.addEventListener("keydown", function (evt) {
  if (evt.key !== "Escape") { return; }
  document.querySelectorAll("header details.nav-menu[open]").forEach(function (d) {
    d.open = false;
    d.querySelector("summary").focus();
  });
});

// "Launch one" in an empty list opens the launch form above it.
document.addEventListener("click", function (evt) {
  var link = evt.target.closest("[data-open-launch]");
  var panel = document.getElementById("launch");
  if (!link || !panel) { return; }
  evt.preventDefault();
  panel.open = true;
  panel.scrollIntoView({ block: "start" });
});

// "Find a time" searches for as many GPUs as the quote has, until its own
// count is changed by hand.
document.addEventListener("change", function (evt) {
  var find = document.getElementById("find-count");
  if (!find) { return; }
  if (evt.target === find) { find.dataset.touched = "true"; return; }
  if (evt.target.id === "quote-count" && !find.dataset.touched) { find.value = evt.target.value; }
});
