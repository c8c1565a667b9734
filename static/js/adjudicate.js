/* a2annotate adjudication page: the candidates beside the run's trace, by keyboard.
 *
 *   j / k   select the next / previous candidate: its evidence is marked in the trace and the
 *           first event is scrolled into view
 *   a       accept the selected candidate            r   reject it (stored: decided, not gold)
 *   F       the finish rationale (Ctrl+Enter there finishes)
 *   ]       the next run still to adjudicate         [   the previous run of the disagreement ranking
 * Every form of the panel is sent with fetch and the panel is replaced by the answer: no full
 * reload, the trace (and its scroll position) stays. ] and [ fetch the other run's trace and panel
 * (GET /adjudicate/<run>?fragment=1, rendered by the server's templates) and swap them in, with
 * the address updated (history.pushState; Back and Forward swap too); if that fails, the browser
 * goes to the run's page instead. Links to events of this run go to the trace.
 */
(function () {
  "use strict";
  var panel = document.getElementById("adj-panel");
  if (!panel) return;
  var traceCol = document.getElementById("adj-trace");
  var NOOP = function () {};
  var T = window.A2Trace || { setEvidence: NOOP, goTo: NOOP, focusSearch: NOOP, toggleView: NOOP };
  var runId = panel.getAttribute("data-run-id"), taxonomy = panel.getAttribute("data-taxonomy");
  var sel = -1;
  var busy = false;

  function cands() { return Array.prototype.slice.call(panel.querySelectorAll("#candidates tbody tr[data-status]")); }

  function select(i) {
    var rows = cands();
    if (!rows.length) return;
    sel = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach(function (r, k) { r.classList.toggle("sel", k === sel); });
    var tr = rows[sel];
    tr.focus({ preventScroll: true });
    tr.scrollIntoView({ block: "nearest" });
    var seqs = (tr.getAttribute("data-evidence") || "").split(" ").filter(Boolean);
    var marks = {};
    seqs.forEach(function (s) { marks[s] = { labels: [sel + 1], active: true }; });
    T.setEvidence(marks);
    if (seqs.length) T.goTo(seqs[0], true, { noFocus: true });
  }

  function post(form) {
    var body = new FormData(form);
    // getAttribute: the forms have an input named "action", which shadows form.action
    return fetch(form.getAttribute("action"), { method: "POST", body: body, credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("adj-panel");
        if (!fresh) { window.location.reload(); return; }
        panel.innerHTML = fresh.innerHTML;
        if (sel >= 0) select(sel);
      });
  }

  function decide(cls) {
    var tr = cands()[sel];
    if (!tr) return;
    var f = tr.querySelector("form." + cls);
    if (f) post(f); else select(sel + 1);  // already decided that way (or locked): go on
  }

  // ---------------------------------------------------------------- another run, in place
  function pageUrl(rid, tax) {
    return "/adjudicate/" + encodeURIComponent(rid) + "?taxonomy=" + encodeURIComponent(tax);
  }

  function show(d, push) {
    traceCol.innerHTML = d.trace_html;
    panel.innerHTML = d.panel_html;
    panel.setAttribute("data-run-id", d.run_id);
    panel.setAttribute("data-taxonomy", d.taxonomy);
    runId = d.run_id;
    taxonomy = d.taxonomy;
    sel = -1;
    document.title = d.title;
    if (push) history.pushState({ adjRun: d.run_id, taxonomy: d.taxonomy }, "", d.url);
    if (T.remount) T.remount();
    window.scrollTo(0, 0);
    // focus the new run's heading (announced by screen readers); j then selects its first candidate
    var h = document.getElementById("adj-title");
    if (h) h.focus({ preventScroll: true });
  }

  function swapTo(rid, tax, push) {
    if (busy) return;
    busy = true;
    var url = pageUrl(rid, tax);
    fetch(url + "&fragment=1", { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (d) {
        if (!d || typeof d.trace_html !== "string" || typeof d.panel_html !== "string" || !traceCol) throw new Error("bad answer");
        show(d, push);
        busy = false;
      })
      .catch(function () { window.location.href = url; });  // fall back to the full page
  }

  /* dir 1: the next run still to adjudicate after this one in the disagreement ranking (wrapping
     round; none left: back to the disagreements list). dir -1: the run ranked just before this one. */
  function neighbour(dir) {
    if (busy) return;
    fetch("/api/v1/agreement/disagreements?taxonomy=" + encodeURIComponent(taxonomy) + "&page_size=500",
          { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : { runs: [] }; })
      .then(function (d) {
        var runs = d.runs || [];
        var at = -1;
        runs.forEach(function (x, i) { if (x.run_id === runId) at = i; });
        var target = null;
        if (dir < 0) {
          if (at > 0) target = runs[at - 1];
        } else {
          var order = runs.slice(at + 1).concat(runs.slice(0, Math.max(at, 0)));
          target = order.filter(function (x) { return !x.adjudicated && x.run_id !== runId; })[0] || null;
          if (!target) { window.location.href = "/disagreements?taxonomy=" + encodeURIComponent(taxonomy); return; }
        }
        if (target) swapTo(target.run_id, d.taxonomy || taxonomy, true);
      });
  }

  history.replaceState({ adjRun: runId, taxonomy: taxonomy }, "", location.href);
  window.addEventListener("popstate", function (e) {
    var st = e.state;
    if (st && st.adjRun && st.adjRun !== runId) swapTo(st.adjRun, st.taxonomy, false);
  });

  // ---------------------------------------------------------------- listeners
  panel.addEventListener("submit", function (e) {
    e.preventDefault();
    post(e.target);
  });
  panel.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest("a[href]");
    if (a) {
      var m = /#e-(\d+)$/.exec(a.getAttribute("href"));
      if (m && a.getAttribute("href").indexOf(encodeURIComponent(runId)) !== -1) { e.preventDefault(); T.goTo(m[1], true); return; }
    }
    var tr = e.target.closest && e.target.closest("#candidates tbody tr[data-status]");
    if (tr && !e.target.closest("button, a, input, select, textarea")) select(cands().indexOf(tr));
  });

  var NOT_TEXT = /^(checkbox|radio|button|submit|reset|range|color|file|image)$/;
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    var typing = t && (t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable ||
                       (t.tagName === "INPUT" && !NOT_TEXT.test((t.type || "text").toLowerCase())));
    if (typing) {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && t.form) { e.preventDefault(); post(t.form); }
      else if (e.key === "Escape") { t.blur(); e.preventDefault(); }
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var k = e.key, done = true;
    if (k === "j") select(sel + 1);
    else if (k === "k") select(sel < 0 ? 0 : sel - 1);
    else if (k === "a") decide("accept-form");
    else if (k === "r") decide("reject-form");
    else if (k === "]") neighbour(1);
    else if (k === "[") neighbour(-1);
    else if (k === "F") { var ta = panel.querySelector("#finish-form textarea"); if (ta) ta.focus(); }
    else if (k === "/") T.focusSearch();
    else if (k === "v") T.toggleView();
    else done = false;
    if (done) e.preventDefault();
  });
  window.A2Adjudicate = { select: select, selected: function () { return sel; }, runId: function () { return runId; } };
})();
