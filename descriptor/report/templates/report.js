// mas-econ report: small progressive enhancements of the index and grid pages; they read fine without them.
// (The run viewer's script is run.js.)
// No network: this file only touches the DOM of the page it is loaded in.
(function () {
  "use strict";

  function gridFilters(block) {
    var rows = block.querySelectorAll("table.grid tbody tr");
    var count = block.querySelector("[data-count]");
    function apply(kind) {
      var shown = 0;
      rows.forEach(function (tr) {
        var keep = kind === "all" || tr.classList.contains(kind);
        tr.classList.toggle("hidden", !keep);
        if (keep) { shown += 1; }
      });
      if (count) { count.textContent = shown + " of " + rows.length + " tasks on this page"; }
      block.querySelectorAll("[data-filter]").forEach(function (b) {
        b.classList.toggle("on", b.getAttribute("data-filter") === kind);
      });
    }
    block.querySelectorAll("[data-filter]").forEach(function (b) {
      b.addEventListener("click", function () { apply(b.getAttribute("data-filter")); });
    });
    apply("all");
  }

  function highlightTarget() {
    // A link to a grid row (#task-...) marks it, so it is easy to spot after the jump.
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target) {
      target.classList.add("target");
    }
  }

  document.querySelectorAll(".grid-block").forEach(gridFilters);
  highlightTarget();
  window.addEventListener("hashchange", highlightTarget);
  document.body.setAttribute("data-ready", "1");
})();
