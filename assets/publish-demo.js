/* Demo mode of a published page: ArrowRight / ArrowLeft step through the slides, and the
   charts' type follows the screen (large on a projector, small on a phone). */
(function () {
  "use strict";
  var NARROW = 700, LARGE = 18, SMALL = 12;
  function deck() { return document.querySelector(".demo-deck"); }
  function fit() {
    if (!window.Plotly) { return; }
    var size = window.innerWidth < NARROW ? SMALL : LARGE;
    document.querySelectorAll(".demo-graph .js-plotly-plot").forEach(function (gd) {
      if (gd.layout && gd.layout.font && gd.layout.font.size !== size) {
        window.Plotly.relayout(gd, {"font.size": size});
      }
    });
  }
  function show(d, next) {
    var slides = d.querySelectorAll(".demo-slide");
    if (!slides.length) { return; }
    var n = Math.max(0, Math.min(slides.length - 1, next));
    slides.forEach(function (s, i) {
      s.classList.toggle("active", i === n);
      s.setAttribute("aria-hidden", i === n ? "false" : "true");
    });
    d.setAttribute("data-index", String(n));
    var counter = d.querySelector(".demo-counter");
    if (counter) { counter.textContent = (n + 1) + " / " + slides.length; }
    var graph = slides[n].querySelector(".js-plotly-plot");
    if (graph && window.Plotly) { window.Plotly.Plots.resize(graph); }
  }
  document.addEventListener("keydown", function (ev) {
    var d = deck();
    if (!d || ev.altKey || ev.ctrlKey || ev.metaKey) { return; }
    var at = parseInt(d.getAttribute("data-index") || "0", 10);
    if (ev.key === "ArrowRight" || ev.key === "PageDown" || ev.key === " ") {
      show(d, at + 1); ev.preventDefault();
    } else if (ev.key === "ArrowLeft" || ev.key === "PageUp") {
      show(d, at - 1); ev.preventDefault();
    } else if (ev.key === "Escape") {
      var leave = d.querySelector(".demo-leave");
      if (leave) { leave.click(); }
    }
  });
  window.addEventListener("resize", fit);
  document.addEventListener("plotly_afterplot", fit, true);
  new MutationObserver(function () { if (deck()) { fit(); } })
    .observe(document.documentElement, {childList: true, subtree: true});
})();
