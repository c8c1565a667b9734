/* a2annotate adjudication page: the candidates beside the run's trace, by keyboard.
 *
 *   j / k   select the next / previous candidate: its evidence is marked in the trace and the
 *           first event is scrolled into view
 *   a       accept the selected candidate            r   reject it (undo its gold label if accepted)
 *   F       the finish rationale (Ctrl+Enter there finishes)   ]   next disputed run
 * Every form of the panel is sent with fetch and the panel is replaced by the answer: no full
 * reload, the trace (and its scroll position) stays. Links to events of this run go to the trace.
 */
(function () {
  "use strict";
  var panel = document.getElementById("adj-panel");
  if (!panel) return;
  var T = window.A2Trace || { setEvidence: function () {}, goTo: function () {}, focusSearch: function () {},
                              toggleView: function () {} };
  var runId = panel.getAttribute("data-run-id"), taxonomy = panel.getAttribute("data-taxonomy");
  var sel = -1;
  var rejected = {};

  function cands() { return Array.prototype.slice.call(panel.querySelectorAll("#candidates tbody tr[data-status]")); }
  function key(tr) { return tr.cells[0].textContent.trim() + "|" + tr.cells[1].textContent.trim(); }

  function select(i) {
    var rows = cands();
    if (!rows.length) return;
    sel = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach(function (r, k) { r.classList.toggle("sel", k === sel); r.classList.toggle("rejected", !!rejected[key(r)]); });
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

  function accept() {
    var tr = cands()[sel];
    if (!tr) return;
    var f = tr.querySelector("form");
    if (f) post(f); else select(sel + 1);
  }
  function reject() {
    var tr = cands()[sel];
    if (!tr) return;
    var gid = tr.getAttribute("data-gold-id");
    if (gid && tr.getAttribute("data-accepted") === "true") {
      var undo = panel.querySelector('#gold-labels tr[data-gold-id="' + gid + '"] input[name="action"][value="undo"]');
      if (undo) { post(undo.form); return; }
    }
    rejected[key(tr)] = true;  // not in gold: leave it out and go on
    select(sel + 1);
  }

  function nextRun() {
    fetch("/api/v1/agreement/disagreements?taxonomy=" + encodeURIComponent(taxonomy) + "&page_size=500",
          { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) { return r.ok ? r.json() : { runs: [] }; })
      .then(function (d) {
        var runs = (d.runs || []).filter(function (x) { return !x.adjudicated && x.run_id !== runId; });
        if (!runs.length) { window.location.href = "/disagreements?taxonomy=" + encodeURIComponent(taxonomy); return; }
        window.location.href = "/adjudicate/" + encodeURIComponent(runs[0].run_id) + "?taxonomy=" + encodeURIComponent(taxonomy);
      });
  }

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
    else if (k === "a") accept();
    else if (k === "r") reject();
    else if (k === "]") nextRun();
    else if (k === "F") { var ta = panel.querySelector("#finish-form textarea"); if (ta) ta.focus(); }
    else if (k === "/") T.focusSearch();
    else if (k === "v") T.toggleView();
    else done = false;
    if (done) e.preventDefault();
  });
  window.A2Adjudicate = { select: select, selected: function () { return sel; } };
})();
