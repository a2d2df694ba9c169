/* Explore's charts on a narrow screen: Plotly never wraps a title, so a title wider than its
 * chart is cut at the chart's edge (on a phone, most of it). When a chart is drawn or the
 * window resized, a title too wide for its chart is broken into lines at word boundaries
 * (it stays the figure's own text, only <br>s are added) and the top margin grows; the
 * preview's watermark shrinks to fit inside the plot. Served from /assets (CSP 'self').
 */
(function () {
  "use strict";
  var PAD = 24;               // px kept free beside a title
  var NARROW = 576;           // below this width the preview's watermark gets smaller
  var MODEBAR = 28;           // px of the modebar's row at the top of a chart
  var GAP = 8;                // px between a wrapped title and the legend or plot under it
  var LINE = 21;              // px per title line (17 px type; subtitle lines are smaller)

  function plain(text) { return text.replace(/<[^>]+>/g, ""); }

  function wrapLine(line, limit) {
    var words = line.split(" "), out = [], cur = "";
    words.forEach(function (w) {
      var next = cur ? cur + " " + w : w;
      if (plain(next).length > limit && cur) { out.push(cur); cur = w; } else { cur = next; }
    });
    if (cur) { out.push(cur); }
    return out;
  }

  /* The title of ``gd`` with lines no longer than ``limit`` characters. Plotly's <sup>
   * ends at a <br>, so a wrapped subtitle reopens it on each of its lines. */
  function wrapTitle(text, limit) {
    return text.split("<br>").map(function (part) {
      var sup = /^<sup>(.*)<\/sup>$/.exec(part);
      var lines = wrapLine(sup ? sup[1] : part, sup ? Math.round(limit * 1.3) : limit);
      return lines.map(function (l) { return sup ? "<sup>" + l + "</sup>" : l; }).join("<br>");
    }).join("<br>");
  }

  function longest(text) {
    return Math.max.apply(null, text.split("<br>").map(function (p) {
      return plain(p).length;
    }));
  }

  function fit(gd) {
    if (!window.Plotly || !gd.layout || !gd.layout.title || !gd._fullLayout) { return; }
    var node = gd.querySelector(".g-gtitle .gtitle");
    var frame = gd.getBoundingClientRect();
    var title = gd.layout.title, text = title.text || "";
    if (!node || !frame.width || !text) { return; }
    if (gd._pceWrapped !== text) {         // a new figure: its own title and top margin
      gd._pceOriginal = text;
      gd._pceTitle = {yref: title.yref, y: title.y, yanchor: title.yanchor};
      gd._pceTop = (gd.layout.margin || {}).t || 0;
    }
    var original = gd._pceOriginal, height = gd._fullLayout.height, changes = {};
    if (text === original || !gd._pcePerChar) {   // px per character of the title's type
      var first = node.querySelector("tspan.line") || node;
      var chars = plain(original.split("<br>")[0]).length;
      gd._pcePerChar = first.getComputedTextLength() / Math.max(1, chars);
    }
    var room = frame.width - PAD, want = original;
    if (gd._pcePerChar * longest(original) > room) {
      want = wrapTitle(original, Math.max(12, Math.floor(room / gd._pcePerChar)));
    }
    if (want !== text) {
      gd._pceWrapped = want;
      changes["title.text"] = want;
      if (want === original) {             // wide enough again: as the figure drew it
        changes["title.yref"] = gd._pceTitle.yref;
        changes["title.y"] = gd._pceTitle.y;
        changes["title.yanchor"] = gd._pceTitle.yanchor;
        changes["margin.t"] = gd._pceTop;
      } else {                             // first guess; placed exactly once drawn
        changes["title.yref"] = "container";
        changes["title.yanchor"] = "top";
        changes["title.y"] = 1 - MODEBAR / height;
        changes["margin.t"] = gd._pceTop + LINE * (want.split("<br>").length -
                                                   original.split("<br>").length);
      }
    } else if (text !== original && title.yref === "container") {
      // a wrapped title, drawn: its top just under the modebar's row, the legend (if any)
      // and the plot under its last line
      var box = node.getBoundingClientRect(), shift = frame.top + MODEBAR - box.top;
      if (Math.abs(shift) > 1) { changes["title.y"] = title.y - shift / height; }
      var legend = gd.querySelector(".legend");
      var legendHeight = legend ? legend.getBoundingClientRect().height : 0;
      var top = Math.ceil(box.bottom + shift - frame.top + GAP + legendHeight);
      if (Math.abs(top - ((gd.layout.margin || {}).t || 0)) > 2) { changes["margin.t"] = top; }
    }
    (gd.layout.annotations || []).forEach(function (a, i) {
      if (a.text && a.text.indexOf("PREVIEW") === 0 && a.font) {
        var size = frame.width < NARROW ? 13 : 22;
        if (a.font.size !== size) { changes["annotations[" + i + "].font.size"] = size; }
      }
    });
    if (Object.keys(changes).length) { window.Plotly.relayout(gd, changes); }
  }

  function fitAll() {
    document.querySelectorAll(".dp-graph .js-plotly-plot").forEach(fit);
  }
  var queued = false;
  function schedule() {
    if (!queued) {
      queued = true;
      window.requestAnimationFrame(function () { queued = false; fitAll(); });
    }
  }
  document.addEventListener("plotly_afterplot", schedule, true);
  window.addEventListener("resize", schedule);
  new MutationObserver(function (records) {
    for (var i = 0; i < records.length; i++) {
      if (records[i].target.closest && records[i].target.closest(".graphs")) {
        schedule();
        return;
      }
    }
  }).observe(document.documentElement, {childList: true, subtree: true});
})();
