/* a2annotate trace view: focus, search, folding, deep links, evidence marks.
 *
 * The server renders every event once; this script never builds rows. It uses a handful of
 * delegated listeners (no per-event listeners) and O(n) passes only on demand (first search,
 * collapse all). Public API on window.A2Trace for labeling.js.
 */
(function () {
  "use strict";
  var api = { onAttach: null };

  /* mount(): wire the trace now in #trace (its rows, toolbar, search, filters); again after the
     adjudication page swaps in another run's trace (A2Trace.remount). Listeners on the trace's own
     elements go with them; the three on window/document are added once below and call the
     current mount. */
  function mount() {
    var trace = document.getElementById("trace");
    if (!trace) return null;
    var rows = Array.prototype.slice.call(trace.querySelectorAll(":scope > .ev"));
    var bySeq = {};
    rows.forEach(function (r, i) { bySeq[r.dataset.seq] = i; });
    var focusedIdx = -1;
    var texts = null;            // lower-cased searchable text per row, built on first search
    var matches = [];            // row indexes matching the current query
    var cur = -1;                // position in matches
    var query = "";
    var marked = [];             // rows currently marked as evidence
    var searchInput = document.getElementById("trace-search");
    var searchCount = document.getElementById("search-count");
    var searchFilter = document.getElementById("search-filter");
    var toolbar = document.getElementById("ev-toolbar");
    var stickyHead = document.getElementById("sticky-head");
    var filterAgent = document.getElementById("filter-agent");
    var filterKind = document.getElementById("filter-kind");
    var scrubber = document.getElementById("seq-scrubber");
    var scrubPos = document.getElementById("scrub-pos");
    var activeMarks = {};        // seq -> true when the event is evidence of the active label

    /* More lanes than trace.css has rules for: set the lane variables from the data attributes
       (CSSOM, allowed under a strict CSP, unlike style="" in the HTML). */
    var nLanes = Number(trace.getAttribute("data-n")) || 1;
    function laneStyles(list) {
      if (nLanes <= 16) return;
      list.forEach(function (r) { r.style.setProperty("--s", r.dataset.s); r.style.setProperty("--w", r.dataset.w); });
    }
    if (nLanes > 16) {
      trace.style.setProperty("--n", nLanes);
      var lh = document.querySelector(".lane-head");
      if (lh) lh.style.setProperty("--n", nLanes);
      laneStyles(rows);
    }

    /* Windowed rendering: a long run ships its first few hundred events as rows and the rest in
       <template class="ev-chunk"> blocks (inert: no layout, no style) that become rows, in order,
       when the reader scrolls near the end, jumps to a later event, searches or filters. */
    var chunks = Array.prototype.slice.call(trace.querySelectorAll(":scope > template.ev-chunk"));
    var lastMarks = {};
    function materializeNext() {
      var tpl = chunks.shift();
      if (!tpl) return false;
      var frag = tpl.content;
      var fresh = Array.prototype.filter.call(frag.children, function (c) { return c.classList.contains("ev"); });
      trace.insertBefore(frag, tpl);
      tpl.remove();
      fresh.forEach(function (r) { bySeq[r.dataset.seq] = rows.length; rows.push(r); });
      laneStyles(fresh);
      texts = null;
      if (Object.keys(lastMarks).length) setEvidence(lastMarks);
      if (trace.classList.contains("filtered")) applyFilters();
      return true;
    }
    function ensureSeq(seq) { while (bySeq[String(seq)] === undefined && materializeNext()) { /* next chunk */ } }
    function ensureIndex(i) { while (rows.length <= i && materializeNext()) { /* next chunk */ } }
    function ensureAll() { while (materializeNext()) { /* every chunk */ } }
    var scrollPending = false;
    function onScroll() {
      if (!chunks.length || scrollPending) return;
      scrollPending = true;
      requestAnimationFrame(function () {
        scrollPending = false;
        var last = rows[rows.length - 1];
        if (last && last.getBoundingClientRect().bottom < window.innerHeight + 1500) materializeNext();
      });
    }

    function rowOf(el) {
      var r = el && el.closest ? el.closest(".ev") : null;
      return r && r.parentNode === trace ? r : null;
    }

    function isShown(i) {
      var r = rows[i];
      if (r.classList.contains("filtered-out")) return false;
      return !trace.classList.contains("filtering") || r.classList.contains("match");
    }

    /* Roving tabindex: only the focused event (and its own controls) are in the Tab order. */
    var INNER = "a.seq, a.reply, summary, button.unfold";
    function setRoving(r, on) {
      r.tabIndex = on ? 0 : -1;
      r.querySelectorAll(INNER).forEach(function (c) { c.tabIndex = on ? 0 : -1; });
    }
    var tabRow = rows.length ? rows[0] : null;  // the row holding tabindex=0 (the first one at load)

    function placeToolbar(r) {
      if (!toolbar) return;
      var h = r.querySelector(".ev-h");
      if (h && toolbar.parentNode !== h) h.appendChild(toolbar);
      toolbar.hidden = false;
      syncToolbar();
    }
    function syncToolbar() {
      if (!toolbar || focusedIdx < 0) return;
      var r = rows[focusedIdx];
      var b = toolbar.querySelector(".attach");
      b.firstChild.textContent = activeMarks[r.dataset.seq] ? "− evidence " : "+ evidence ";
      var t = toolbar.querySelector(".tog");
      t.firstChild.textContent = isCollapsed(r) ? "expand " : "collapse ";
    }

    function setFocused(i) {
      if (focusedIdx >= 0 && rows[focusedIdx]) rows[focusedIdx].classList.remove("focused");
      focusedIdx = i;
      var r = rows[i];
      r.classList.add("focused");
      if (tabRow && tabRow !== r) setRoving(tabRow, false);
      setRoving(r, true);
      tabRow = r;
      placeToolbar(r);
      if (scrubber && Number(scrubber.value) !== i) scrubber.value = String(i);
      if (scrubPos) scrubPos.textContent = "#" + r.dataset.seq;
    }

    function focusIdx(i, opts) {
      if (i < 0 || i >= rows.length) return;
      setFocused(i);
      var r = rows[i];
      if (!opts || !opts.noFocus) r.focus({ preventScroll: true });
      reveal(r, opts && opts.center ? "center" : "nearest");
    }

    /* Rows use content-visibility:auto, so rows rendered for the first time change height after
       the first scroll; scrolling again on the next two frames lands on the row. */
    function reveal(r, block) {
      r.scrollIntoView({ block: block });
      requestAnimationFrame(function () {
        r.scrollIntoView({ block: block });
        requestAnimationFrame(function () { r.scrollIntoView({ block: block }); });
      });
    }

    function move(delta) {
      if (!rows.length) return;
      var i = focusedIdx;
      if (i < 0 || !rowInView(rows[i])) {  // start where the reader is looking
        i = firstVisible();
        if (isShown(i)) { focusIdx(i); return; }
      }
      for (var j = i + delta; j >= 0; j += delta) {
        if (j >= rows.length && !materializeNext()) return;
        if (isShown(j)) { focusIdx(j); return; }
      }
    }

    function rowInView(r) {
      var b = r.getBoundingClientRect();
      return b.bottom > 0 && b.top < window.innerHeight;
    }

    function firstVisible() {
      // the first row whose top is inside the viewport (so `j` starts where the reader is)
      var top = 0;
      var head = document.querySelector(".sticky-head");
      if (head) top = head.getBoundingClientRect().bottom;
      var lo = 0, hi = rows.length - 1, ans = 0;
      while (lo <= hi) {  // binary search: rows are in document order
        var mid = (lo + hi) >> 1;
        if (rows[mid].getBoundingClientRect().bottom < top) { lo = mid + 1; } else { ans = mid; hi = mid - 1; }
      }
      return ans;
    }

    function goTo(seq, flash, opts) {
      ensureSeq(seq);
      var i = bySeq[String(seq)];
      if (i === undefined) return false;
      var r = rows[i];
      if (trace.classList.contains("filtering") && !r.classList.contains("match")) {
        searchFilter.checked = false;
        trace.classList.remove("filtering");
      }
      if (r.classList.contains("filtered-out")) clearFilters();
      expandRow(r);
      focusIdx(i, { center: true, noFocus: opts && opts.noFocus });
      if (flash) {
        r.classList.remove("flash");
        void r.offsetWidth;  // restart the animation
        r.classList.add("flash");
      }
      return true;
    }

    function expandRow(r) {
      if (!r.classList.contains("private")) return;
      if (trace.classList.contains("collapse-private")) r.classList.add("open");
      r.classList.remove("closed");
    }

    // ---------------------------------------------------------------- search
    function rowText(r) {
      var parts = [];
      for (var c = r.firstElementChild; c; c = c.nextElementSibling) {
        if (c.tagName === "HEADER") {
          for (var h = c.firstElementChild; h; h = h.nextElementSibling) {
            if (h !== toolbar && !h.classList.contains("ev-mark")) parts.push(h.textContent);
          }
        } else {
          parts.push(c.textContent);
        }
      }
      return parts.join(" ").toLowerCase();
    }

    function runSearch(q) {
      q = (q || "").trim().toLowerCase();
      if (q === query) return;
      query = q;
      for (var k = 0; k < matches.length; k++) rows[matches[k]].classList.remove("match", "current-match");
      matches = [];
      cur = -1;
      if (!q) {
        trace.classList.remove("filtering", "searching");
        searchCount.textContent = "";
        highlight();
        return;
      }
      ensureAll();
      if (!texts) texts = rows.map(rowText);
      for (var i = 0; i < rows.length; i++) {
        if (texts[i].indexOf(q) !== -1) { rows[i].classList.add("match"); matches.push(i); }
      }
      trace.classList.add("searching");
      trace.classList.toggle("filtering", !!searchFilter.checked);
      updateCount();
    }

    /* The matched text itself is highlighted (CSS Custom Highlight API: ranges, no DOM change):
       "a2-search" on every match in the matching rows, "a2-search-cur" in the current one. */
    var HL = window.CSS && CSS.highlights && window.Highlight ? CSS.highlights : null;
    var HL_MAX = 2000;
    function rangesIn(r, q) {
      var out = [];
      var walker = document.createTreeWalker(r, NodeFilter.SHOW_TEXT, {
        acceptNode: function (n) { return toolbar && toolbar.contains(n) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT; } });
      for (var n = walker.nextNode(); n; n = walker.nextNode()) {
        var low = n.data.toLowerCase(), at = low.indexOf(q);
        while (at !== -1) {
          var rg = document.createRange();
          rg.setStart(n, at); rg.setEnd(n, at + q.length);
          out.push(rg);
          at = low.indexOf(q, at + q.length);
        }
      }
      return out;
    }
    function highlight() {
      if (!HL) return;
      HL.delete("a2-search"); HL.delete("a2-search-cur");
      if (!query) return;
      var all = [], n = 0;
      for (var k = 0; k < matches.length && n < HL_MAX; k++) {
        var rs = rangesIn(rows[matches[k]], query);
        n += rs.length;
        all.push.apply(all, rs);
      }
      var h = new Highlight();
      all.forEach(function (rg) { h.add(rg); });
      HL.set("a2-search", h);
      if (cur >= 0) {
        var hc = new Highlight();
        rangesIn(rows[matches[cur]], query).forEach(function (rg) { hc.add(rg); });
        HL.set("a2-search-cur", hc);
      }
    }

    function updateCount() {
      highlight();
      if (!query) { searchCount.textContent = ""; return; }
      searchCount.textContent = !matches.length ? "0 matches"
        : cur < 0 ? matches.length + (matches.length === 1 ? " match" : " matches")
        : (cur + 1) + "/" + matches.length;
    }

    function step(delta) {
      runSearch(searchInput.value);
      if (!matches.length) { updateCount(); return; }
      if (cur >= 0) rows[matches[cur]].classList.remove("current-match");
      if (cur < 0 && delta < 0) cur = 0;
      cur = (cur + delta + matches.length) % matches.length;
      var r = rows[matches[cur]];
      r.classList.add("current-match");
      expandRow(r);
      r.querySelectorAll("details:not([open])").forEach(function (d) {
        if (d.textContent.toLowerCase().indexOf(query) !== -1) d.open = true;
      });
      focusIdx(matches[cur], { center: true, noFocus: true });
      updateCount();
    }

    var searchTimer = null;
    if (searchInput) {
      searchInput.addEventListener("input", function () {
        clearTimeout(searchTimer);
        searchTimer = setTimeout(function () { runSearch(searchInput.value); }, 120);
      });
      searchInput.addEventListener("keydown", function (e) {
        if (e.key === "Enter") { e.preventDefault(); step(e.shiftKey ? -1 : 1); }
        else if (e.key === "Escape") {
          // leave the field (the query and its matches stay; clear it with the box's ×): the next
          // key is a shortcut again, on the event the search landed on
          e.preventDefault();
          e.stopPropagation();
          searchInput.blur();
          if (focusedIdx >= 0) rows[focusedIdx].focus({ preventScroll: true });
        }
      });
    }
    if (searchFilter) {
      searchFilter.addEventListener("change", function () {
        trace.classList.toggle("filtering", searchFilter.checked && !!query);
      });
    }

    // ---------------------------------------------------------------- collapsing
    function setCollapsePrivate(on) {
      trace.querySelectorAll(":scope > .ev.open, :scope > .ev.closed").forEach(function (r) {
        r.classList.remove("open", "closed");
      });
      trace.classList.toggle("collapse-private", on);
      var btn = document.querySelector('[data-act="toggle-private"]');
      if (btn) {
        btn.textContent = on ? "Expand private" : "Collapse private";
        btn.setAttribute("aria-pressed", on ? "true" : "false");
      }
    }

    function toggleRow(r) {
      if (!r.classList.contains("private")) return;
      if (trace.classList.contains("collapse-private")) r.classList.toggle("open");
      else r.classList.toggle("closed");
      syncToolbar();
    }
    function isCollapsed(r) {
      if (!r.classList.contains("private")) return false;
      return trace.classList.contains("collapse-private") ? !r.classList.contains("open") : r.classList.contains("closed");
    }

    // ---------------------------------------------------------------- filters, view, scrubber
    function applyFilters() {
      if ((filterAgent && filterAgent.value) || (filterKind && filterKind.value)) ensureAll();
      var ag = filterAgent ? filterAgent.value : "", kd = filterKind ? filterKind.value : "";
      var kcls = kd ? "k-" + kd : "";
      for (var i = 0; i < rows.length; i++) {
        var r = rows[i], ok = true;
        if (ag) ok = r.dataset.a === ag || (" " + (r.dataset.r || "") + " ").indexOf(" " + ag + " ") !== -1;
        if (ok && kcls) ok = r.classList.contains(kcls);
        r.classList.toggle("filtered-out", !ok);
      }
      trace.classList.toggle("filtered", !!(ag || kd));
    }
    function clearFilters() {
      if (filterAgent) filterAgent.value = "";
      if (filterKind) filterKind.value = "";
      applyFilters();
    }
    if (filterAgent) filterAgent.addEventListener("change", applyFilters);
    if (filterKind) filterKind.addEventListener("change", applyFilters);

    var VIEW_KEY = "a2annotate.view";
    function setView(compact) {
      trace.classList.toggle("compact", compact);
      if (stickyHead) stickyHead.classList.toggle("compact", compact);
      document.querySelectorAll('[data-act="view-lanes"], [data-act="view-compact"]').forEach(function (b) {
        var on = (b.getAttribute("data-act") === "view-compact") === compact;
        b.setAttribute("aria-pressed", on ? "true" : "false");
      });
      try { localStorage.setItem(VIEW_KEY, compact ? "compact" : "lanes"); } catch (e) { /* private mode */ }
      if (focusedIdx >= 0) reveal(rows[focusedIdx], "center");
    }
    try { if (localStorage.getItem(VIEW_KEY) === "compact") setView(true); } catch (e) { /* private mode */ }

    /* Lanes that fit: with more agents than the width can give a readable lane (LANE_MIN px), the
       lane view has two lanes, "speaker" (the agent acting, its private events) and "others" (whom
       it speaks to). The reader's own choice (buttons, or L) is remembered and wins. */
    var LANES_KEY = "a2annotate.lanes";
    var LANE_MIN = 190;
    function lanePref() { try { return localStorage.getItem(LANES_KEY) || ""; } catch (e) { return ""; } }
    function setTwoLane(two) {
      trace.classList.toggle("two-lane", two);
      if (stickyHead) stickyHead.classList.toggle("two-lane", two);
      document.querySelectorAll('[data-act="lanes-all"], [data-act="lanes-two"]').forEach(function (b) {
        var on = (b.getAttribute("data-act") === "lanes-two") === two;
        b.setAttribute("aria-pressed", on ? "true" : "false");
      });
    }
    function autoLanes() {
      if (nLanes <= 2) return;
      var pref = lanePref();
      setTwoLane(pref ? pref === "two" : trace.clientWidth / nLanes < LANE_MIN);
    }
    function chooseLanes(two) {
      try { localStorage.setItem(LANES_KEY, two ? "two" : "all"); } catch (e) { /* private mode */ }
      setTwoLane(two);
      if (focusedIdx >= 0) reveal(rows[focusedIdx], "center");
    }
    autoLanes();
    if (window.ResizeObserver && nLanes > 2) new ResizeObserver(function () { if (!lanePref()) autoLanes(); }).observe(trace);

    if (scrubber) {
      scrubber.addEventListener("input", function () {
        var i = Number(scrubber.value);
        ensureIndex(i);
        if (rows[i]) goTo(rows[i].dataset.seq, false, { noFocus: true });
      });
    }

    // arrows, Home and End on the focused event (the roving tabindex); j / k come from labeling.js
    trace.addEventListener("keydown", function (e) {
      if (rowOf(e.target) !== e.target || e.ctrlKey || e.metaKey || e.altKey) return;
      var k = e.key;
      if (k === "ArrowDown") move(1);
      else if (k === "ArrowUp") move(-1);
      else if (k === "Home") { for (var i = 0; i < rows.length; i++) if (isShown(i)) { focusIdx(i); break; } }
      else if (k === "End") { ensureAll(); for (var j = rows.length - 1; j >= 0; j--) if (isShown(j)) { focusIdx(j); break; } }
      else return;
      e.preventDefault();
    });

    // ---------------------------------------------------------------- evidence marks
    /* marks: {seq: {labels: [1, 3], active: true}} */
    function markOf(r) {
      var m = r.querySelector(".ev-mark");
      if (!m) {
        m = document.createElement("span");
        m.className = "ev-mark";
        var h = r.querySelector(".ev-h");
        h.insertBefore(m, toolbar && toolbar.parentNode === h ? toolbar : null);
      }
      return m;
    }

    function setEvidence(marks) {
      lastMarks = marks;
      marked.forEach(function (r) { r.classList.remove("is-ev", "is-ev-active"); });
      marked = [];
      activeMarks = {};
      Object.keys(marks).forEach(function (seq) {
        var i = bySeq[seq];
        if (i === undefined) return;
        var r = rows[i], m = marks[seq];
        r.classList.add("is-ev");
        if (m.active) r.classList.add("is-ev-active");
        markOf(r).textContent = "evidence of " + m.labels.map(function (n) { return "L" + n; }).join(", ");
        if (m.active) activeMarks[seq] = true;  // the toolbar then offers "− evidence": a second press detaches
        marked.push(r);
      });
      syncToolbar();
    }

    // ---------------------------------------------------------------- delegated listeners
    function onClick(e) {
      var link = e.target.closest && e.target.closest('a[href^="#e-"]');
      if (link) {
        var seq = link.getAttribute("href").slice(3);
        if (goTo(seq, true)) {
          e.preventDefault();
          history.replaceState(null, "", "#e-" + seq);
        }
        return;
      }
      var act = e.target.closest && e.target.closest("[data-act]");
      var r = rowOf(e.target);
      if (act && r) {
        var a = act.getAttribute("data-act");
        if (a === "toggle") { toggleRow(r); }
        else if (a === "attach") { focusIdx(bySeq[r.dataset.seq], { noFocus: true }); if (api.onAttach) api.onAttach(Number(r.dataset.seq)); }
        else if (a === "copy-link") {
          var href = location.href.split("#")[0] + "#e-" + r.dataset.seq;
          if (navigator.clipboard) navigator.clipboard.writeText(href).catch(function () {});
          history.replaceState(null, "", "#e-" + r.dataset.seq);
        }
        else if (a === "unfold") {
          var prev = act.previousElementSibling;
          if (prev) prev.classList.remove("folded");
          act.remove();
        }
        return;
      }
      if (act) {
        var b = act.getAttribute("data-act");
        if (b === "toggle-private") setCollapsePrivate(!trace.classList.contains("collapse-private"));
        else if (b === "toggle-context") toggleContext();
        else if (b === "search-next") step(1);
        else if (b === "view-lanes") setView(false);
        else if (b === "view-compact") setView(true);
        else if (b === "lanes-all") chooseLanes(false);
        else if (b === "lanes-two") chooseLanes(true);
        else if (b === "search-prev") step(-1);
        return;
      }
      if (r && !e.target.closest("a, button, summary, pre, input, textarea, select")) {
        var sel = window.getSelection && window.getSelection();
        if (!sel || sel.isCollapsed) focusIdx(bySeq[r.dataset.seq], { noFocus: false });
      }
    }

    trace.addEventListener("focusin", function (e) {
      var r = rowOf(e.target);
      if (r && r === e.target) {
        var i = bySeq[r.dataset.seq];
        if (i !== focusedIdx) setFocused(i);
      }
    });

    function toggleContext() {
      document.body.classList.toggle("ctx-hidden");
    }

    function fromHash() {
      var m = /^#e-(\d+)$/.exec(location.hash);
      if (m) goTo(m[1], true);
    }
    // no deep link: the first event starts focused (without taking the keyboard), so its toolbar shows
    if (!/^#e-\d+$/.test(location.hash) && rows.length) setFocused(0);
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", fromHash);
    else fromHash();

    api.move = move;
    api.goTo = goTo;
    api.focusedSeq = function () { return focusedIdx >= 0 ? Number(rows[focusedIdx].dataset.seq) : null; };
    api.setEvidence = setEvidence;
    api.toggleCollapsePrivate = function () { setCollapsePrivate(!trace.classList.contains("collapse-private")); };
    api.toggleContext = toggleContext;
    api.toggleFocused = function () { if (focusedIdx >= 0) toggleRow(rows[focusedIdx]); };
    api.toggleView = function () { setView(!trace.classList.contains("compact")); };
    api.isCompact = function () { return trace.classList.contains("compact"); };
    api.toggleLanes = function () { if (nLanes > 2) chooseLanes(!trace.classList.contains("two-lane")); };
    api.focusScrubber = function () { if (scrubber) scrubber.focus(); };
    api.focusEvent = function () {
      if (focusedIdx < 0) { move(1); return; }
      rows[focusedIdx].focus({ preventScroll: true });
      reveal(rows[focusedIdx], "nearest");
    };
    api.focusSearch = function () { if (searchInput) { searchInput.focus(); searchInput.select(); } };
    api.count = function () { return rows.length + chunks.reduce(function (n, c) { return n + c.content.childElementCount; }, 0); };
    api.rendered = function () { return rows.length; };
    return { scroll: onScroll, click: onClick, hash: fromHash };
  }

  var current = mount();
  if (!current) return;
  window.addEventListener("scroll", function () { if (current) current.scroll(); }, { passive: true });
  document.addEventListener("click", function (e) { if (current) current.click(e); });
  window.addEventListener("hashchange", function () { if (current) current.hash(); });
  api.remount = function () { current = mount(); return !!current; };
  window.A2Trace = api;
})();
