/* a2annotate labeling panel: labels, evidence, drafts, submit, next run, time on task, keyboard.
 *
 * Talks to the JSON API with the session cookie and the X-CSRF-Token header:
 *   GET  /api/v1/annotations/mine?run_id=&taxonomy=   the caller's annotation (404: none yet); only
 *                                                     when the page did not embed it (cfg.mine)
 *   POST /api/v1/annotations                          save a draft (autosave) or submit, with the
 *                                                     `version` last seen (409 + current: changed elsewhere)
 *   GET  /api/v1/queue/next                           {"run_id"} of the next run (404: queue empty)
 *   GET  /login                                       its <meta name="csrf-token">: the session's current
 *                                                     token after a 403 naming CSRF (one retry)
 * A 401 (the session ended) says to log in again in another tab; the labels stay on the page and
 * are saved on the next change. cfg.locked (the run is adjudicated) makes the panel read-only.
 * Every piece of user data is put in the page with textContent / value, never as HTML.
 */
(function () {
  "use strict";
  var cfgEl = document.getElementById("run-config");
  var panel = document.getElementById("label-panel");
  if (!cfgEl || !panel) return;
  var cfg = JSON.parse(cfgEl.textContent);
  var csrfMeta = document.querySelector('meta[name="csrf-token"]');
  var csrf = csrfMeta ? csrfMeta.getAttribute("content") : "";
  var T = window.A2Trace || { setEvidence: function () {}, move: function () {}, goTo: function () {},
                              focusedSeq: function () { return null; } };

  var $labels = document.getElementById("labels");
  var $errors = document.getElementById("lp-errors");
  var $save = document.getElementById("save-state");
  var $noFail = document.getElementById("no-failure");
  var $note = document.getElementById("run-note");
  var $submit = document.getElementById("btn-submit");
  var $next = document.getElementById("btn-next");
  var $time = document.getElementById("time-on-task");
  var $picker = document.getElementById("mode-picker");
  var $filter = document.getElementById("mode-filter");
  var $modeList = document.getElementById("mode-list");
  var $shortcuts = document.getElementById("shortcuts");
  var $flagDlg = document.getElementById("flag-dialog");
  var $flagForm = document.getElementById("flag-form");
  var $flagErr = document.getElementById("flag-error");
  var $flagNote = document.getElementById("lp-flag");

  var modeByCode = {};
  cfg.modes.forEach(function (m) { modeByCode[m.code] = m; });
  /* An attribution taxonomy (cfg.attribution: Who&When's shape): a label is an attribution, the
     responsible agent (1-9 picks the run's agent by number, a cycles), the step (x or Enter sets it
     to the focused event: one step) and the reason (e: the note). Modes, if the taxonomy has any,
     stay optional. */
  var ATT = cfg.attribution || null;
  var ATT_ONLY = !!ATT && !cfg.modes.length;
  function hasContent(l) { return !!l.mode || (!!ATT && (!!l.agent || l.evidence.length > 0)); }

  // ---------------------------------------------------------------- visible time on task
  var visibleMs = 0;
  var visibleSince = document.visibilityState === "visible" ? performance.now() : null;
  function vnow() { return visibleMs + (visibleSince !== null ? performance.now() - visibleSince : 0); }
  var sentMs = 0;  // vnow() covered by the last successful save (the server adds deltas)

  // ---------------------------------------------------------------- state
  var state = { labels: [], active: -1, noFailure: false, note: "", status: null, loaded: false,
                dirty: false, editedAfterSubmit: false };

  function newLabel(init) {
    init = init || {};
    return { mode: init.mode || "", agent: init.agent || "", principals: (init.principals || []).slice(),
             evidence: (init.evidence || []).slice(), note: init.note || "",
             confidence: init.confidence === undefined ? null : init.confidence,
             baseMs: init.time_ms || 0, t0: vnow(), tLast: null, uid: Math.random().toString(36).slice(2) };
  }
  function labelMs(l) { return l.baseMs + (l.tLast !== null ? Math.max(0, l.tLast - l.t0) : 0); }
  function touch(l) { if (l) l.tLast = vnow(); }

  function fmtMs(ms) {
    var s = Math.round(ms / 1000), m = Math.floor(s / 60);
    s = s % 60;
    return m + ":" + (s < 10 ? "0" : "") + s;
  }

  // ---------------------------------------------------------------- rendering
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) {
      if (k === "class") e.className = attrs[k];
      else if (attrs[k] !== null && attrs[k] !== undefined && attrs[k] !== false) e.setAttribute(k, attrs[k]);
    });
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function modeSelect(l) {
    var s = el("select", { "data-f": "mode", "aria-label": "Failure mode" });
    s.appendChild(el("option", { value: "" }, "— choose a mode (m) —"));
    cfg.categories.forEach(function (c) {
      var g = el("optgroup", { label: (c.code ? c.code + " · " : "") + (c.name || "") });
      cfg.modes.forEach(function (m) {
        if (m.category === c.code) g.appendChild(el("option", { value: m.code }, m.code + " " + m.name));
      });
      s.appendChild(g);
    });
    s.value = l.mode || "";
    return s;
  }

  function agentSelect(l) {
    var s = el("select", { "data-f": "agent", "aria-label": "Responsible agent", required: "required" });
    s.appendChild(el("option", { value: "" }, ATT ? "— responsible agent (1-9) —" : "— responsible agent (a, or a then 1-9) —"));
    cfg.agents.forEach(function (a, i) {
      s.appendChild(el("option", { value: a.id }, (i < 9 ? (i + 1) + "  " : "") + a.id +
                                                  (a.principal_name ? "  (for " + a.principal_name + ")" : "")));
    });
    s.value = l.agent || "";
    return s;
  }

  function renderLabels() {
    $labels.textContent = "";
    state.labels.forEach(function (l, i) {
      var card = el("section", { "class": "label-card" + (i === state.active ? " active" : ""), "data-i": i,
                                 "aria-label": "Label " + (i + 1) });
      var head = el("div", { "class": "lc-head" });
      var title = el("button", { type: "button", "class": "lc-title", "data-act": "activate",
                                 title: "Make this the active label (evidence goes here)" });
      title.appendChild(el("span", { "class": "lc-n" }, "L" + (i + 1)));
      var m = modeByCode[l.mode];
      title.appendChild(el("span", { "class": "lc-mode" }, m ? m.code + " · " + m.name : (ATT ? "attribution" : "no mode yet")));
      head.appendChild(title);
      if (i === state.active) head.appendChild(el("span", { "class": "lc-active small" }, "active"));
      head.appendChild(el("span", { "class": "lc-time small muted", title: "time on this label" }, fmtMs(labelMs(l))));
      head.appendChild(el("button", { type: "button", "class": "lc-remove", "data-act": "remove",
                                      title: "Delete this label", "aria-label": "Delete label " + (i + 1) }, "✕"));
      card.appendChild(head);
      var sum = el("div", { "class": "lc-summary" });
      sum.appendChild(el("span", l.agent ? null : { "class": "missing" }, l.agent || "no agent"));
      sum.appendChild(document.createTextNode(" · "));
      sum.appendChild(el("span", l.evidence.length ? null : { "class": "missing" },
        l.evidence.length ? "evidence " + l.evidence.slice().sort(function (a, b) { return a - b; })
          .map(function (q) { return "#" + q; }).join(", ") : "no evidence"));
      if (l.note) sum.appendChild(document.createTextNode(" · " + l.note));
      card.appendChild(sum);

      var body = el("div", { "class": "lc-body" });
      if (!ATT_ONLY) {
        var r1 = el("label", { "class": "lc-field" });
        r1.appendChild(el("span", null, ATT ? "Mode (optional)" : "Mode"));
        r1.appendChild(modeSelect(l));
        body.appendChild(r1);
      }
      var r2 = el("label", { "class": "lc-field" + (l.agent ? "" : " missing") });
      r2.appendChild(el("span", null, "Responsible agent"));
      r2.appendChild(agentSelect(l));
      body.appendChild(r2);

      if (cfg.principals.length) {
        var fs = el("fieldset", { "class": "lc-principals" });
        fs.appendChild(el("legend", null, "Affected principals (optional)"));
        cfg.principals.forEach(function (p) {
          var lab = el("label", { "class": "chk" });
          var cb = el("input", { type: "checkbox", "data-f": "principal", value: p.id });
          cb.checked = l.principals.indexOf(p.id) !== -1;
          lab.appendChild(cb);
          lab.appendChild(document.createTextNode(" " + (p.name || p.id)));
          fs.appendChild(lab);
        });
        body.appendChild(fs);
      }

      var ev = el("div", { "class": "lc-evidence" + (l.evidence.length ? "" : " missing") });
      ev.appendChild(el("span", { "class": "lc-label" }, ATT ? "Step" : "Evidence"));
      if (!l.evidence.length) {
        ev.appendChild(el("span", { "class": "small muted" },
          i === state.active ? (ATT ? "none yet: focus the event of the decisive mistake (j/k) and press x"
                                    : "none yet: focus an event (j/k) and press x, or click its “+ evidence”")
                             : "none yet (make this label active first)"));
      }
      l.evidence.slice().sort(function (a, b) { return a - b; }).forEach(function (seq) {
        var chip = el("span", { "class": "chip" });
        chip.appendChild(el("a", { href: "#e-" + seq, title: "Go to event #" + seq }, "#" + seq));
        chip.appendChild(el("button", { type: "button", "data-act": "rm-ev", "data-seq": seq,
                                        "aria-label": "Remove event " + seq + " from evidence" }, "×"));
        ev.appendChild(chip);
      });
      body.appendChild(ev);

      var r3 = el("label", { "class": "lc-field" });
      r3.appendChild(el("span", null, ATT ? "Reason" : "Note"));
      var ta = el("textarea", { "data-f": "note", rows: "2", "aria-label": ATT ? "Reason" : "Note",
                                placeholder: ATT ? "reason: what went wrong at this step (e; Esc leaves)"
                                                 : "why this mode, for whom (optional)" });
      ta.value = l.note || "";
      r3.appendChild(ta);
      body.appendChild(r3);

      var r4 = el("label", { "class": "lc-field lc-conf" });
      r4.appendChild(el("span", null, "Confidence"));
      var cs = el("select", { "data-f": "confidence", "aria-label": "Confidence (optional)" });
      [["", "—"], ["0.25", "low"], ["0.5", "medium"], ["0.75", "high"], ["1", "certain"]].forEach(function (o) {
        cs.appendChild(el("option", { value: o[0] }, o[1]));
      });
      cs.value = l.confidence === null || l.confidence === undefined ? "" : String(Number(l.confidence));
      if (cs.value === "" && l.confidence !== null && l.confidence !== undefined) {
        cs.appendChild(el("option", { value: String(l.confidence) }, String(l.confidence)));
        cs.value = String(l.confidence);
      }
      r4.appendChild(cs);
      body.appendChild(r4);
      card.appendChild(body);
      card.appendChild(el("div", { "class": "lc-err", role: "alert", hidden: "hidden" }));
      $labels.appendChild(card);
    });
    $noFail.checked = state.noFailure;
    $noFail.disabled = state.labels.length > 0 || !!cfg.locked;
    if (cfg.locked) {
      $labels.querySelectorAll("select, textarea, input").forEach(function (c) { c.disabled = true; });
      $labels.querySelectorAll('[data-act="remove"], [data-act="rm-ev"]').forEach(function (c) { c.hidden = true; });
    }
    $noFail.parentNode.title = state.labels.length ? "Remove the labels first" : "";
    if (!state.labels.length && !state.noFailure) {
      $labels.appendChild(el("p", { "class": "small muted empty" },
        "No labels yet. Read the events with j / k (the focused one is outlined); press n (or “+ New label”) " +
        "for a failure, or tick “No failure found”. All keys: ?"));
    }
    pushMarks();
  }

  function pushMarks() {
    var marks = {};
    state.labels.forEach(function (l, i) {
      l.evidence.forEach(function (seq) {
        var m = marks[seq] || (marks[seq] = { labels: [], active: false });
        m.labels.push(i + 1);
        if (i === state.active) m.active = true;
      });
    });
    T.setEvidence(marks);
  }

  function cardOf(i) { return $labels.querySelector('.label-card[data-i="' + i + '"]'); }

  // ---------------------------------------------------------------- messages
  /* errorsFrom says what the shown messages are about: "submit" (what the annotation still needs
     before it can be submitted: only a new check, or a successful submit, changes it), "save" (a
     failed save: the next successful save clears it) or "info"; a draft autosave never wipes a
     submit check. */
  var errorsFrom = null, submitTried = false;
  function showErrors(msgs, from) {
    $errors.textContent = "";
    errorsFrom = msgs && msgs.length ? (from || "save") : null;
    if (!msgs || !msgs.length) { $errors.hidden = true; return; }
    msgs.forEach(function (m) { $errors.appendChild(el("div", null, m)); });
    $errors.hidden = false;
  }
  function clearSaveErrors() {
    if (errorsFrom === "save") { showErrors(null); clearCardErrors(); }
  }
  function setSave(text, kind) {
    $save.textContent = text;
    $save.className = "save-state small" + (kind ? " " + kind : "");
  }
  function clearCardErrors() {
    $labels.querySelectorAll(".lc-err").forEach(function (e) { e.hidden = true; e.textContent = ""; });
    $labels.querySelectorAll(".label-card.invalid").forEach(function (c) { c.classList.remove("invalid"); });
  }
  function cardError(i, msg) {
    var c = cardOf(i);
    if (!c) return false;
    c.classList.add("invalid");
    var e = c.querySelector(".lc-err");
    e.textContent = msg;
    e.hidden = false;
    return true;
  }
  function detailText(body) {
    if (!body) return "request failed";
    var d = body.detail;
    if (typeof d === "string") return d;
    if (Array.isArray(d)) return d.map(function (x) { return (x.loc ? x.loc.join(".") + ": " : "") + (x.msg || JSON.stringify(x)); }).join("; ");
    return JSON.stringify(d || body);
  }
  function showServerError(status, body) {
    if (status === 401) {
      clearCardErrors();
      showErrors(["You are logged out (the session ended), so this was not saved. Your labels are still on this page: " +
                  "log in again in another tab, then come back and press Submit (or change anything) to save them."]);
      $errors.appendChild(el("a", { href: "/login?next=" + encodeURIComponent("/runs/" + cfg.run_id), target: "_blank",
                                    rel: "noopener" }, "Log in again (new tab)"));
      setSave("not saved: logged out", "bad");
      return;
    }
    var msg = detailText(body);
    var m = /labels\[(\d+)\]/.exec(msg);
    var i = m ? (sentIdx[Number(m[1])] !== undefined ? sentIdx[Number(m[1])] : Number(m[1])) : -1;
    clearCardErrors();
    if (m && cardError(i, msg)) showErrors(["Label L" + (i + 1) + ": " + msg]);
    else showErrors([msg]);
    setSave(status === 422 ? "not saved: see the message" : "not saved (" + status + ")", "bad");
  }

  // ---------------------------------------------------------------- API
  function send(method, url, body, keepalive) {
    var opts = { method: method, credentials: "same-origin",
                 headers: { "Accept": "application/json", "X-CSRF-Token": csrf } };
    if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
    if (keepalive) opts.keepalive = true;
    return fetch(url, opts).then(function (r) {
      return r.text().then(function (t) {
        var j = null;
        try { j = t ? JSON.parse(t) : null; } catch (e) { j = { detail: t }; }
        return { status: r.status, ok: r.ok, body: j };
      });
    });
  }
  /* A 403 naming CSRF means this page's token is stale (the user logged in again in another tab):
     fetch the session's current token once and repeat the request. */
  function api(method, url, body, keepalive) {
    return send(method, url, body, keepalive).then(function (r) {
      var d = r.body && typeof r.body.detail === "string" ? r.body.detail : "";
      if (r.status !== 403 || d.indexOf("CSRF") === -1 || method === "GET") return r;
      // the login page is the cheapest page that carries the session's token in its <meta>
      return fetch("/login", { credentials: "same-origin", headers: { "Accept": "text/html" } })
        .then(function (x) { return x.ok ? x.text() : ""; })
        .then(function (html) {
          var m = /<meta name="csrf-token" content="([^"]+)"/.exec(html);
          if (!m || m[1] === csrf) return r;
          csrf = m[1];
          if (csrfMeta) csrfMeta.setAttribute("content", csrf);
          return send(method, url, body, keepalive);
        }, function () { return r; });
    });
  }

  // ---------------------------------------------------------------- changed elsewhere (optimistic concurrency)
  /* Every save sends the annotation `version` this page last saw (0: none yet); the server answers
     409 {detail, current} when the stored annotation changed since (another tab, another device),
     and writes nothing. The panel then says so and offers: Reload (take the stored version) or
     Overwrite (save this page's labels over it). Self-contained: it wraps api() and
     showServerError() instead of editing them. */
  state.version = cfg.mine && typeof cfg.mine.version === "number" ? cfg.mine.version : 0;
  var lastSaveStatus = "draft";
  var apiBeforeVersions = api;
  api = function (method, url, body, keepalive) {
    var isAnnotation = url.indexOf("/api/v1/annotations") === 0;
    if (isAnnotation && method === "POST" && body) {
      body.version = state.version;
      lastSaveStatus = body.status || "draft";
    }
    return apiBeforeVersions(method, url, body, keepalive).then(function (r) {
      if (isAnnotation && r.ok && r.body && typeof r.body.version === "number") state.version = r.body.version;
      return r;
    });
  };
  var showServerErrorBeforeVersions = showServerError;
  showServerError = function (status, body) {
    if (status === 409 && body && "current" in body) { changedElsewhere(body.current); return; }
    showServerErrorBeforeVersions(status, body);
  };
  function changedElsewhere(current) {
    clearCardErrors();
    var when = current && current.updated_at ? " (saved " + new Date(current.updated_at).toLocaleString() + ")" : "";
    showErrors(["Changed elsewhere: this annotation was saved from another tab or device" + when +
                " after this page loaded. Your changes on this page are NOT saved."]);
    var reload = el("button", { type: "button", "class": "btn-conflict-reload" }, "Reload the saved version");
    var overwrite = el("button", { type: "button", "class": "btn-conflict-overwrite" }, "Overwrite it with this page");
    reload.addEventListener("click", function () {
      state.dirty = false;  // leaving: do not autosave this page's (stale) labels on pagehide
      window.location.reload();
    });
    overwrite.addEventListener("click", function () {
      state.version = current && typeof current.version === "number" ? current.version : 0;
      showErrors(null);
      if (lastSaveStatus === "submitted") submit();
      else { state.dirty = true; saveDraft(); }
    });
    $errors.appendChild(reload);
    $errors.appendChild(overwrite);
    setSave("not saved: changed elsewhere", "bad");
  }

  var sentIdx = [];  // card index of each label in the last payload (server errors name labels[i])
  function payload(status, upTo) {
    var labels = state.labels;
    if (status === "draft") labels = labels.filter(hasContent);  // a draft label needs a mode (or, attributions, an agent or step)
    sentIdx = labels.map(function (l) { return state.labels.indexOf(l); });
    return {
      run_id: cfg.run_id, taxonomy: cfg.taxonomy, status: status, no_failure: !!state.noFailure,
      note: state.note || null, time_ms: Math.max(0, Math.round(upTo - sentMs)),
      labels: labels.map(function (l) {
        return { mode: l.mode || (ATT ? null : l.mode), agent: l.agent || null, principals: l.principals.slice(), evidence: l.evidence.slice(),
                 note: l.note || null, confidence: l.confidence === "" ? null : l.confidence,
                 time_ms: Math.round(labelMs(l)) };
      })
    };
  }

  var saveTimer = null, inFlight = null, again = false;
  function changed() {
    if (cfg.locked) return;
    state.dirty = true;
    if (submitTried && errorsFrom !== "save") recheck();
    if (state.status === "submitted") {
      state.editedAfterSubmit = true;
      setSave("edited after submitting: press Submit to update", "warn");
      return;
    }
    setSave("unsaved changes…", "");
    clearTimeout(saveTimer);
    saveTimer = setTimeout(function () { saveDraft(); }, 900);
  }

  function saveDraft(keepalive) {
    clearTimeout(saveTimer);
    if (!state.loaded || state.status === "submitted") return Promise.resolve(null);
    if (inFlight) { again = true; return inFlight; }
    var anyContent = state.labels.some(hasContent) || state.noFailure || state.note;
    if (!anyContent && state.status === null) { state.dirty = false; setSave("nothing to save yet", ""); return Promise.resolve(null); }
    var upTo = vnow();
    var body = payload("draft", upTo);
    setSave("saving…", "");
    inFlight = api("POST", "/api/v1/annotations", body, keepalive).then(function (r) {
      inFlight = null;
      if (r.ok) {
        sentMs = upTo;
        state.status = r.body && r.body.status || "draft";
        state.dirty = again;
        clearSaveErrors();
        var pending = state.labels.some(function (l) { return !hasContent(l); });
        setSave("draft saved " + new Date().toLocaleTimeString() + (pending ? " (a label without a mode is not saved yet)" : ""), "ok");
      } else {
        showServerError(r.status, r.body);
      }
      if (again) { again = false; return saveDraft(); }
      return r;
    }, function () {
      inFlight = null;
      setSave("not saved: network error, will retry", "bad");
      saveTimer = setTimeout(function () { saveDraft(); }, 5000);
    });
    return inFlight;
  }

  function validateForSubmit() {
    clearCardErrors();
    var problems = [];
    if (!state.labels.length && !state.noFailure) {
      problems.push("Add at least one label, or tick “No failure found”.");
    }
    state.labels.forEach(function (l, i) {
      var miss = [];
      if (ATT && !l.mode) {
        if (!l.agent) miss.push("the responsible agent (1-9)");
        if (l.evidence.length !== 1) miss.push("one step (x on the focused event)");
        if (ATT.reason === "required" && !(l.note || "").trim()) miss.push("a reason (e)");
        if (miss.length) {
          cardError(i, "needs " + miss.join(", "));
          problems.push("Attribution L" + (i + 1) + " needs " + miss.join(", ") + ".");
        }
        return;
      }
      if (!l.mode) miss.push("a mode");
      if (!l.agent) miss.push("the responsible agent");
      if (!l.evidence.length) miss.push("at least one evidence event");
      if (miss.length) {
        var msg = "needs " + miss.join(", ");
        cardError(i, msg);
        problems.push("Label L" + (i + 1) + " " + msg + ".");
      }
    });
    return problems;
  }

  /* After a refused submit the list of what is missing follows the edits (and goes when done). */
  function recheck() {
    var problems = validateForSubmit();
    if (problems.length) showErrors(problems, "submit");
    else { showErrors(null); submitTried = false; }
  }

  /* A label nobody filled in (no mode, agent, evidence, note, principals or confidence) holds no
     data: dropped rather than blocking submit, e.g. after n then Esc. */
  function isBlank(l) {
    return !l.mode && !l.agent && !l.evidence.length && !l.note && !l.principals.length &&
           (l.confidence === null || l.confidence === undefined || l.confidence === "");
  }
  function dropBlank(l) {
    var i = state.labels.indexOf(l);
    if (i === -1 || !isBlank(l)) return false;
    state.labels.splice(i, 1);
    if (state.active >= state.labels.length) state.active = state.labels.length - 1;
    else if (state.active > i) state.active -= 1;
    renderLabels();
    return true;
  }

  function submit() {
    if (refuseLocked()) return Promise.resolve(null);
    state.labels.slice().forEach(function (l) { if (isBlank(l)) dropBlank(l); });
    var problems = validateForSubmit();
    if (problems.length) {
      submitTried = true;
      showErrors(problems, "submit");
      setSave("not submitted", "bad");
      return Promise.resolve(null);
    }
    submitTried = false;
    clearTimeout(saveTimer);
    var go = function () {
      var upTo = vnow();
      setSave("submitting…", "");
      return api("POST", "/api/v1/annotations", payload("submitted", upTo)).then(function (r) {
        if (r.ok) {
          sentMs = upTo;
          state.status = "submitted";
          state.dirty = false;
          state.editedAfterSubmit = false;
          showErrors(null);
          setSave("submitted ✓ " + new Date().toLocaleTimeString() + ". Press ] for the next run", "ok");
          panel.classList.add("submitted");
          $next.classList.add("primary");
          $next.focus();
        } else {
          showServerError(r.status, r.body);
        }
        return r;
      });
    };
    return (inFlight || Promise.resolve()).then(go);
  }

  var leaveAnyway = false;
  function nextRun() {
    if (state.editedAfterSubmit && !leaveAnyway) {
      leaveAnyway = true;
      showErrors(["You changed this submitted annotation. Press Submit (s) to keep the changes, or ] again to leave without them."]);
      return Promise.resolve(null);
    }
    var before = state.dirty && state.status !== "submitted" ? saveDraft() : Promise.resolve();
    return Promise.resolve(before).then(function () {
      return api("GET", "/api/v1/queue/next");
    }).then(function (r) {
      if (r.status === 404) {
        showErrors(["Your queue is empty: every assigned run is submitted. "]);
        $errors.appendChild(el("a", { href: "/" }, "Back to the queue"));
        return;
      }
      if (!r.ok) { showServerError(r.status, r.body); return; }
      var rid = r.body && r.body.run_id;
      if (!rid) return;
      if (rid === cfg.run_id) {
        showErrors(["This run is still the next one in your queue: submit it first (s)."]);
        return;
      }
      window.location.href = "/runs/" + encodeURIComponent(rid).replace(/%2F/g, "/");
    });
  }

  // ---------------------------------------------------------------- label operations
  function active() { return state.labels[state.active] || null; }

  /* The run is adjudicated under this taxonomy version: nothing can change (the server says 409). */
  function refuseLocked() {
    if (!cfg.locked) return false;
    flashMsg("This run is adjudicated: its labels are final and can no longer change. Press ] for the next run.");
    return true;
  }

  function addLabel(init) {
    state.labels.push(newLabel(init));
    state.active = state.labels.length - 1;
    state.noFailure = false;
    renderLabels();
    return active();
  }

  function setActive(i) {
    if (i < 0 || i >= state.labels.length || i === state.active) return;
    state.active = i;
    renderLabels();
  }

  function attach(seq) {
    if (refuseLocked()) return;
    if (seq === null || seq === undefined) { flashMsg("Focus an event first: j / k, or click it."); return; }
    var l = active();
    if (!l) {
      l = addLabel();
      flashMsg(ATT ? "Started attribution L" + state.labels.length + " at step #" + seq + ": pick the agent (1-9)."
                   : "Started label L" + state.labels.length + " for this evidence: choose its mode (m).");
    }
    if (ATT && !l.mode) {  // an attribution has one step: the focused event replaces it
      l.evidence = l.evidence.length === 1 && l.evidence[0] === seq ? [] : [seq];
      touch(l);
      renderLabels();
      changed();
      return;
    }
    var k = l.evidence.indexOf(seq);
    if (k === -1) l.evidence.push(seq); else l.evidence.splice(k, 1);
    touch(l);
    renderLabels();
    changed();
  }

  function setMode(code) {
    if (refuseLocked()) return;
    var l = active() || addLabel();
    l.mode = code;
    touch(l);
    renderLabels();
    changed();
  }

  /* 1-9 on an attribution taxonomy: the agent with that number (as the agent list shows it). */
  function pickAgent(n) {
    if (refuseLocked()) return;
    var a = cfg.agents[n - 1];
    if (!a) { flashMsg("This run has " + cfg.agents.length + " agent(s): press 1-" + Math.min(9, cfg.agents.length) + "."); return; }
    var l = active() || addLabel();
    l.agent = a.id;
    touch(l);
    renderLabels();
    changed();
  }

  function cycleAgent() {
    if (refuseLocked()) return;
    var l = active();
    if (!l) { flashMsg("No active label: press n first."); return; }
    if (!cfg.agents.length) return;
    var ids = cfg.agents.map(function (a) { return a.id; });
    var k = ids.indexOf(l.agent);
    l.agent = ids[(k + 1) % ids.length];
    touch(l);
    renderLabels();
    changed();
  }

  /* e: the active label's note, w: its first affected-principal box (Space ticks, Tab moves on);
     Esc leaves the field. */
  function focusField(f) {
    if (refuseLocked()) return;
    if (!active()) { flashMsg("No active label: press n first."); return; }
    var c = cardOf(state.active), x = c && c.querySelector('[data-f="' + f + '"]');
    if (!x) { if (f === "principal") flashMsg("This run declares no principals."); return; }
    x.focus();
    if (x.scrollIntoView) x.scrollIntoView({ block: "nearest" });
  }

  var CONFIDENCE = [null, 0.25, 0.5, 0.75, 1];
  function cycleConfidence() {
    if (refuseLocked()) return;
    var l = active();
    if (!l) { flashMsg("No active label: press n first."); return; }
    var k = CONFIDENCE.indexOf(l.confidence === undefined ? null : l.confidence);
    l.confidence = CONFIDENCE[(k + 1) % CONFIDENCE.length];
    touch(l);
    renderLabels();
    changed();
  }

  var flashTimer = null;
  function flashMsg(text) {
    showErrors([text], "info");
    $errors.classList.add("info");
    clearTimeout(flashTimer);
    flashTimer = setTimeout(function () {
      $errors.classList.remove("info");
      if (errorsFrom === "info") showErrors(null);
      if (submitTried) recheck();
    }, 4000);
  }

  // ---------------------------------------------------------------- panel events (delegated)
  panel.addEventListener("click", function (e) {
    var a = e.target.closest("[data-act]");
    var card = e.target.closest(".label-card");
    var i = card ? Number(card.getAttribute("data-i")) : -1;
    if (card && i !== state.active && !(a && a.getAttribute("data-act") === "remove")) {
      state.active = i;  // an inactive card shows only its summary: open it
      renderLabels();
      if (!a || a.getAttribute("data-act") === "activate") return;
    }
    if (!a) return;
    var act = a.getAttribute("data-act");
    if (act === "activate") { renderLabels(); }
    else if ((act === "remove" || act === "rm-ev") && refuseLocked()) { return; }
    else if (act === "remove") {
      state.labels.splice(i, 1);
      if (state.active >= state.labels.length) state.active = state.labels.length - 1;
      renderLabels();
      changed();
    } else if (act === "rm-ev") {
      var l = state.labels[i], seq = Number(a.getAttribute("data-seq"));
      l.evidence = l.evidence.filter(function (s) { return s !== seq; });
      touch(l);
      renderLabels();
      changed();
    } else if (act === "new-label") { if (!refuseLocked()) { addLabel(); if (!ATT_ONLY) openPicker("", true); } }
    else if (act === "submit") { submit(); }
    else if (act === "next-run") { nextRun(); }
    else if (act === "shortcuts") { openOverlay($shortcuts); }
    else if (act === "set-aside") { openFlag(); }
    else if (act === "unflag") { unflag(); }
    else if (act === "use-mode") { setMode(a.getAttribute("data-mode")); }
  });

  panel.addEventListener("change", function (e) {
    var f = e.target.getAttribute("data-f");
    if (e.target === $noFail) {
      state.noFailure = $noFail.checked;
      renderLabels();
      changed();
      return;
    }
    var card = e.target.closest(".label-card");
    if (!card || !f) return;
    var l = state.labels[Number(card.getAttribute("data-i"))];
    if (f === "mode") { l.mode = e.target.value; touch(l); renderLabels(); }
    else if (f === "agent") { l.agent = e.target.value; touch(l); e.target.closest(".lc-field").classList.toggle("missing", !l.agent); }
    else if (f === "principal") {
      var p = e.target.value, k = l.principals.indexOf(p);
      if (e.target.checked && k === -1) l.principals.push(p);
      if (!e.target.checked && k !== -1) l.principals.splice(k, 1);
      touch(l);
    } else if (f === "confidence") { l.confidence = e.target.value === "" ? null : Number(e.target.value); touch(l); }
    else if (f === "note") { return; }
    changed();
  });

  panel.addEventListener("input", function (e) {
    if (e.target === $note) { state.note = $note.value; changed(); return; }
    if (e.target.getAttribute("data-f") !== "note") return;
    var card = e.target.closest(".label-card");
    var l = state.labels[Number(card.getAttribute("data-i"))];
    l.note = e.target.value;
    touch(l);
    changed();
  });

  T.onAttach = attach;

  // ---------------------------------------------------------------- mode picker
  var pickIdx = 0;
  function pickerItems() { return Array.prototype.slice.call($modeList.children); }
  function visibleItems() { return pickerItems().filter(function (li) { return !li.hidden; }); }
  function filterPicker() {
    var q = $filter.value.trim().toLowerCase();
    var exact = null;
    pickerItems().forEach(function (li) {
      var code = li.getAttribute("data-mode").toLowerCase();
      var ok = !q || code.indexOf(q) === 0 || li.getAttribute("data-search").indexOf(q) !== -1;
      li.hidden = !ok;
      if (code === q) exact = li;
    });
    var vis = visibleItems();
    pickIdx = exact ? vis.indexOf(exact) : 0;
    markPick();
  }
  function markPick() {
    var vis = visibleItems();
    pickerItems().forEach(function (li) { li.classList.remove("sel"); li.removeAttribute("aria-selected"); });
    if (vis[pickIdx]) { vis[pickIdx].classList.add("sel"); vis[pickIdx].setAttribute("aria-selected", "true");
                        vis[pickIdx].scrollIntoView({ block: "nearest" }); }
  }
  var pickerNew = null;  // the blank label `n` made for this picker: dropped if the picker closes unused
  function openPicker(prefix, fresh) {
    if (refuseLocked()) return;
    if (!active()) { addLabel(); fresh = true; }
    document.getElementById("picker-label-n").textContent = "L" + (state.active + 1);
    openOverlay($picker);
    pickerNew = fresh ? active() : null;  // after openOverlay: it closes other overlays first
    $filter.value = prefix || "";
    filterPicker();
    $filter.focus();
  }
  $filter.addEventListener("input", filterPicker);
  $filter.addEventListener("keydown", function (e) {
    var vis = visibleItems();
    if (e.key === "ArrowDown") { e.preventDefault(); pickIdx = Math.min(vis.length - 1, pickIdx + 1); markPick(); }
    else if (e.key === "ArrowUp") { e.preventDefault(); pickIdx = Math.max(0, pickIdx - 1); markPick(); }
    else if (e.key === "Enter") {
      e.preventDefault();
      if (vis[pickIdx]) { pickerNew = null; closeOverlays(); setMode(vis[pickIdx].getAttribute("data-mode")); }
    } else if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); closeOverlays(); }
  });
  $modeList.addEventListener("click", function (e) {
    var li = e.target.closest("li[data-mode]");
    if (li) { pickerNew = null; closeOverlays(); setMode(li.getAttribute("data-mode")); }
  });

  function categoryPrefix(n) {
    var c = cfg.categories[n - 1];
    if (!c) return null;
    var codes = cfg.modes.filter(function (m) { return m.category === c.code; }).map(function (m) { return m.code; });
    if (!codes.length) return null;
    var p = codes[0];
    codes.forEach(function (code) { while (code.indexOf(p) !== 0) p = p.slice(0, -1); });
    return p;
  }

  // ---------------------------------------------------------------- overlays
  var lastFocus = null;
  function openOverlay(o) {
    closeOverlays(true);
    lastFocus = document.activeElement;
    o.hidden = false;
    document.body.classList.add("overlay-open");
  }
  function closeOverlays(keepFocus) {
    var was = false;
    [$picker, $shortcuts, $flagDlg].forEach(function (o) {
      if (!o || o.hidden) return;
      // blur now: a focused input inside a hidden dialog keeps focus until the browser's next
      // style update, and the keys pressed meanwhile would be typed into it
      if (o.contains(document.activeElement)) document.activeElement.blur();
      o.hidden = true;
      was = true;
    });
    document.body.classList.remove("overlay-open");
    if (pickerNew && $picker.hidden) {
      var blank = pickerNew;
      pickerNew = null;
      if (dropBlank(blank)) changed();
    }
    if (was && !keepFocus && lastFocus && lastFocus !== document.body && lastFocus.focus && document.contains(lastFocus)) {
      lastFocus.focus({ preventScroll: true });
    }
    return was;
  }
  [$picker, $shortcuts, $flagDlg].forEach(function (o) {
    if (!o) return;
    o.addEventListener("click", function (e) {
      if (e.target === o || (e.target.closest("[data-act]") && e.target.closest("[data-act]").getAttribute("data-act") === "close-overlay")) closeOverlays();
    });
  });

  // ---------------------------------------------------------------- skip and flag
  function showFlag() {
    if (!$flagNote) return;
    var f = cfg.flag;
    $flagNote.hidden = !f;
    if (!f) return;
    var why = (cfg.reasons && cfg.reasons[f.reason]) || f.reason;
    document.getElementById("lp-flag-text").textContent =
      (f.kind === "flag" ? "You flagged this run for a reviewer: " : "You skipped this run: ") + why +
      (f.note ? " — " + f.note : "") + ". It is out of your queue order until you take it back.";
  }
  function openFlag() {
    if (!$flagDlg || refuseLocked()) return;
    openOverlay($flagDlg);
    var f = cfg.flag;
    $flagErr.hidden = true;
    if (f) {
      $flagForm.querySelector('input[name="kind"][value="' + f.kind + '"]').checked = true;
      var r = $flagForm.querySelector('input[name="reason"][value="' + f.reason + '"]');
      if (r) r.checked = true;
      $flagForm.note.value = f.note || "";
    }
    $flagForm.querySelector('input[name="kind"]:checked').focus();
  }
  function flagKeys(e) {
    var t = e.target, inNote = t && t.tagName === "TEXTAREA";
    if (e.key === "Escape") { e.preventDefault(); if (inNote) { t.blur(); $flagForm.querySelector('input[name="reason"]:checked').focus(); } else closeOverlays(); return; }
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey || !inNote)) {
      if (t && t.tagName === "BUTTON") return;  // Cancel / Save act as buttons
      e.preventDefault();
      $flagForm.requestSubmit();
      return;
    }
    if (!inNote && /^[1-9]$/.test(e.key)) {
      var radios = $flagForm.querySelectorAll('input[name="reason"]'), r = radios[Number(e.key) - 1];
      if (r) { e.preventDefault(); r.checked = true; r.focus(); }
    }
  }
  if ($flagForm) {
    $flagForm.addEventListener("submit", function (e) {
      e.preventDefault();
      var body = { run_id: cfg.run_id, taxonomy: cfg.taxonomy,
                   kind: $flagForm.querySelector('input[name="kind"]:checked').value,
                   reason: $flagForm.querySelector('input[name="reason"]:checked').value,
                   note: $flagForm.note.value.trim() || null };
      var before = state.dirty && state.status !== "submitted" ? saveDraft() : Promise.resolve();
      Promise.resolve(before).then(function () { return api("POST", "/api/v1/flags", body); }).then(function (r) {
        if (!r.ok) { $flagErr.textContent = detailText(r.body); $flagErr.hidden = false; return; }
        cfg.flag = { kind: body.kind, reason: body.reason, note: body.note };
        closeOverlays();
        showFlag();
        var nxt = r.body && r.body.next_run_id;
        window.location.href = nxt ? "/runs/" + encodeURIComponent(nxt).replace(/%2F/g, "/") : "/";
      }, function () { $flagErr.textContent = "network error: not saved"; $flagErr.hidden = false; });
    });
  }
  function unflag() {
    api("DELETE", "/api/v1/flags?run_id=" + encodeURIComponent(cfg.run_id) + "&taxonomy=" + encodeURIComponent(cfg.taxonomy))
      .then(function (r) {
        if (r.ok || r.status === 404) { cfg.flag = null; showFlag(); flashMsg("Back in your queue."); }
        else showServerError(r.status, r.body);
      });
  }
  showFlag();

  // ---------------------------------------------------------------- keyboard
  var agentDigit = false, agentDigitTimer = null, AGENT_DIGIT_MS = 1500;
  var NOT_TEXT = /^(checkbox|radio|button|submit|reset|range|color|file|image)$/;
  function typingIn(t) {
    if (!t) return false;
    if (t.isContentEditable || t.tagName === "TEXTAREA" || t.tagName === "SELECT") return true;
    return t.tagName === "INPUT" && !NOT_TEXT.test((t.type || "text").toLowerCase());
  }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (!$picker.hidden) return;  // the picker's input handles its own keys
    if ($flagDlg && !$flagDlg.hidden) { flagKeys(e); return; }
    if (!$shortcuts.hidden) {
      if (e.key === "Escape" || e.key === "?") { e.preventDefault(); closeOverlays(); }
      return;
    }
    if (typingIn(t)) {
      if (e.key === "Escape") { t.blur(); e.preventDefault(); }
      return;
    }
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") { e.preventDefault(); submit(); return; }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var k = e.key;
    if (k !== "a" && !/^[1-9]$/.test(k)) agentDigit = false;
    if (k === "Enter") {
      if (t && t.closest && t.closest("a, button, summary, input, label")) return;  // Enter activates the control
      e.preventDefault(); attach(T.focusedSeq()); return;
    }
    var handled = true;
    if (k === "j") T.move(1);
    else if (k === "k") T.move(-1);
    else if (k === "x") attach(T.focusedSeq());
    else if (k === "n") { if (!refuseLocked()) { addLabel(); if (!ATT_ONLY) openPicker("", true); } }
    else if (k === "m") { if (ATT_ONLY) handled = false; else openPicker(""); }
    else if (ATT && /^[1-9]$/.test(k)) pickAgent(Number(k));
    else if (agentDigit && /^[1-9]$/.test(k)) { agentDigit = false; pickAgent(Number(k)); }
    else if (/^[1-9]$/.test(k)) {
      // the active label if it has no mode yet, else a new label: the mode list opens on category k
      var p = categoryPrefix(Number(k));
      if (p === null) handled = false;
      else if (!refuseLocked()) {
        if (active() && !active().mode) openPicker(p);
        else { addLabel(); openPicker(p, true); }
      }
    }
    else if (k === "a") {
      // a cycles the agent; a digit right after it (within AGENT_DIGIT_MS) picks agent 1-9 instead
      cycleAgent();
      if (active()) {
        agentDigit = true;
        clearTimeout(agentDigitTimer);
        agentDigitTimer = setTimeout(function () { agentDigit = false; }, AGENT_DIGIT_MS);
      }
    }
    else if (k === "L") { if (T.toggleLanes) T.toggleLanes(); }
    else if (k === "l") { if (state.labels.length) setActive((state.active + 1) % state.labels.length); }
    else if (k === "/") T.focusSearch();
    else if (k === "s") submit();
    else if (k === "]") nextRun();
    else if (k === "?") openOverlay($shortcuts);
    else if (k === "f") openFlag();
    else if (k === "u") { var fl = document.getElementById("lp-flag"); if (fl && !fl.hidden) unflag(); else flashMsg("This run is not skipped or flagged: nothing to take back."); }
    else if (k === "c") T.toggleCollapsePrivate();
    else if (k === "o") T.toggleFocused && T.toggleFocused();
    else if (k === "v") T.toggleView && T.toggleView();
    else if (k === "g") T.focusScrubber && T.focusScrubber();
    else if (k === "t") T.focusEvent && T.focusEvent();
    else if (k === "e") focusField("note");
    else if (k === "i") cycleConfidence();
    else if (k === "w") focusField("principal");
    else if (k === "r") { if (!cfg.locked) { $note.focus(); } }
    else if (k === "0") {
      if (refuseLocked()) { /* read-only */ }
      else if (state.labels.length) flashMsg("Remove the labels first (D deletes the active one) to say “no failure found”.");
      else { state.noFailure = !state.noFailure; renderLabels(); changed(); }
    }
    else if (k === "D") {
      if (!refuseLocked() && active()) {
        state.labels.splice(state.active, 1);
        if (state.active >= state.labels.length) state.active = state.labels.length - 1;
        renderLabels();
        changed();
      }
    }
    else if (k === "p") T.toggleContext();
    else if (k === "Escape") { closeOverlays(); showErrors(null); }
    else handled = false;
    if (handled) e.preventDefault();
  });

  // ---------------------------------------------------------------- time, leaving, loading
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") {
      if (visibleSince === null) visibleSince = performance.now();
    } else {
      if (visibleSince !== null) { visibleMs += performance.now() - visibleSince; visibleSince = null; }
      if (state.dirty && state.status !== "submitted") saveDraft(true);
    }
  });
  window.addEventListener("pagehide", function () {
    if (state.dirty && state.status !== "submitted") saveDraft(true);
  });
  setInterval(function () {
    $time.textContent = "Time on this run (visible): " + fmtMs(vnow() + (state.baseMs || 0));
    state.labels.forEach(function (l, i) {
      var c = cardOf(i), t = c && c.querySelector(".lc-time");
      if (t) t.textContent = fmtMs(labelMs(l));
    });
  }, 5000);

  function load() {
    var url = "/api/v1/annotations/mine?run_id=" + encodeURIComponent(cfg.run_id) + "&taxonomy=" + encodeURIComponent(cfg.taxonomy);
    var got = "mine" in cfg ? Promise.resolve(cfg.mine ? { ok: true, status: 200, body: cfg.mine } : { ok: false, status: 404, body: null })
                            : api("GET", url);
    return got.then(function (r) {
      if (r.ok && r.body) {
        var a = r.body;
        state.labels = (a.labels || []).map(newLabel);
        state.active = state.labels.length ? 0 : -1;
        state.noFailure = !!a.no_failure;
        state.note = a.note || "";
        state.status = a.status || "draft";
        state.baseMs = a.time_ms || 0;
        $note.value = state.note;
        if (cfg.locked) {
          setSave(state.status === "submitted" ? "submitted; the run is adjudicated (read-only)"
                                               : "draft; the run is adjudicated (read-only)", "ok");
        } else if (state.status === "submitted") {
          panel.classList.add("submitted");
          setSave("submitted earlier: edit and press Submit to update", "ok");
        } else {
          setSave("draft loaded", "");
        }
      } else if (r.status === 404) {
        setSave(cfg.locked ? "the run is adjudicated (read-only)" : "not started", "");
      } else {
        showServerError(r.status, r.body);
      }
      state.loaded = true;
      renderLabels();
    }, function () {
      state.loaded = true;
      setSave("could not load your labels (network)", "bad");
      renderLabels();
    });
  }
  if (cfg.locked) {
    $note.disabled = true;
    $submit.disabled = true;
    $submit.title = "The run is adjudicated: its labels can no longer change";
    panel.classList.add("locked");
  }
  /* Reviewers: the others' attributions (e.g. the dataset's mistake step) marked on their step in
     the trace, beside the reviewer's own (evidence marks). Events not rendered yet (a long run's
     later chunks) get the mark when their chunk opens. */
  function markAttributions(root) {
    (cfg.attributions || []).forEach(function (a) {
      if (a.step === null || a.step === undefined) return;
      var ev = (root || document).querySelector('article.ev[data-seq="' + a.step + '"]');
      if (!ev || ev.querySelector('.att-mark[data-who="' + CSS.escape(a.annotator) + '"]')) return;
      var h = ev.querySelector(".ev-h") || ev;
      var who = a.kind !== "human" && a.source_name ? a.source_name : a.annotator;
      var m = el("span", { "class": "att-mark", "data-who": a.annotator,
                           title: a.annotator + " attributes the failure to " + a.agent + " at this step" +
                                  (a.reason ? ": " + a.reason : "") }, "◆ " + who + ": " + a.agent);
      h.appendChild(m);
      ev.classList.add("att-step");
    });
  }
  if (cfg.attributions && cfg.attributions.length) {
    markAttributions(document);
    var traceEl = document.getElementById("trace");
    if (traceEl && window.MutationObserver) {
      new MutationObserver(function () { markAttributions(document); }).observe(traceEl, { childList: true });
    }
  }
  renderLabels();
  load();
  window.A2Label = { state: state, submit: submit, nextRun: nextRun, saveDraft: saveDraft };
})();
