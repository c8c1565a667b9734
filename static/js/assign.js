/* The assignment form's live preview: on every change the form is sent to
   /admin/assignments/preview (which creates nothing) and the counts are shown before Assign. */
(function () {
  "use strict";
  var form = document.getElementById("assign-form");
  var box = document.getElementById("assign-preview");
  if (!form || !box) return;
  var timer = null, seq = 0;

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function show(r) {
    box.textContent = "";
    var h = el("h2", "Preview ");
    h.appendChild(el("span", "(nothing created yet)", "muted small"));
    box.appendChild(h);
    var p = el("p", r.runs_matching + " run(s) match, " + r.runs_selected + " sampled; " + r.created +
               " new (run, annotator) pair(s)" + (r.skipped_existing ? ", " + r.skipped_existing +
               " already assigned and left alone" : "") + (r.skipped_full ? ", " + r.skipped_full +
               " left out because the run has k annotators already" : "") + (r.skipped_removed ? ", " +
               r.skipped_removed + " removed by hand before" : "") + ". Policy " + (r.policy || "random") +
               (r.first_picks && r.first_picks.length ? ", first run's inclusion probability " +
                r.first_picks[0].inclusion_prob.toFixed(4) : "") + ".");
    p.id = "preview-summary";
    box.appendChild(p);
    var t = el("table", undefined, "data"), tb = el("tbody");
    var hr = el("tr");
    hr.appendChild(el("th", "Annotator"));
    hr.appendChild(el("th", "New runs", "num"));
    var th = el("thead");
    th.appendChild(hr);
    t.appendChild(th);
    Object.keys(r.per_annotator || {}).forEach(function (name) {
      var tr = el("tr");
      tr.appendChild(el("td", name));
      tr.appendChild(el("td", String(r.per_annotator[name]), "num"));
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    box.appendChild(t);
  }

  function refresh() {
    var mine = ++seq;
    var data = new FormData(form);
    data.delete("preview");
    if (!data.getAll("annotators").length) {
      box.textContent = "";
      var p = el("p", "Tick at least one annotator to see what Assign would create.", "muted");
      p.id = "preview-summary";
      box.appendChild(p);
      return;
    }
    fetch("/admin/assignments/preview", { method: "POST", body: data, credentials: "same-origin",
                                          headers: { "Accept": "application/json" } })
      .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, body: j }; }); })
      .then(function (r) {
        if (mine !== seq) return;  // an older answer
        if (r.ok) show(r.body);
        else {
          box.textContent = "";
          var p = el("p", "Preview: " + (r.body && r.body.detail || "not possible"), "error");
          p.id = "preview-summary";
          box.appendChild(p);
        }
      });
  }
  function later() { clearTimeout(timer); timer = setTimeout(refresh, 250); }
  form.addEventListener("input", later);
  form.addEventListener("change", later);
})();
