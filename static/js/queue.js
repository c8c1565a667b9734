/* The queue page by keyboard: ] or Enter opens the next run; j / k move through the list (the
   row's link takes the focus, so Enter opens it). Off while typing in a field. */
(function () {
  "use strict";
  var start = document.getElementById("start-next");
  var links = Array.prototype.slice.call(document.querySelectorAll("#queue-table tbody td:nth-child(2) > a"));
  var at = -1;
  function typing(t) {
    return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    var k = e.key;
    if (k === "]" || (k === "Enter" && (e.target === document.body || !e.target.closest("a, button, summary, input, label")))) {
      if (start) { e.preventDefault(); window.location.href = start.href; }
    } else if ((k === "j" || k === "k") && links.length) {
      e.preventDefault();
      var cur = links.indexOf(document.activeElement);
      at = cur >= 0 ? cur : at;
      at = Math.max(0, Math.min(links.length - 1, at + (k === "j" ? 1 : -1)));
      links[at].focus();
    }
  });
})();
