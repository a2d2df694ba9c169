"""Layout checks in a real browser: text that overlaps other text, or is cut off.

Every text box is a polygon: an SVG text element's bounding box through its screen transform
(Plotly rotates crowded tick labels, whose axis-aligned boxes would overlap while the glyphs do
not), an HTML text node's line boxes. Two boxes overlap when no axis separates them by more
than ``TOLERANCE`` pixels (separating-axis test).
"""

from __future__ import annotations

TOLERANCE = 1.5   # pixels two boxes may share (anti-aliasing, line boxes that touch)

TEXT_BOXES_JS = r"""
const roots = arguments[0], tol = arguments[1];
const boxes = [];
function shown(el) {
  const folded = el.closest('details:not([open])');
  if (folded && !el.closest('summary')) { return false; }
  for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
    const s = getComputedStyle(e);
    if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) === 0) {
      return false;
    }
  }
  return true;
}
function scrollers(el) {
  const out = [];
  for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
    const s = getComputedStyle(e);
    if (/(auto|scroll|hidden)/.test(s.overflowX + s.overflowY)) {
      out.push(e.getBoundingClientRect());
    }
  }
  return out;
}
function svgBox(t) {
  const b = t.getBBox(), m = t.getScreenCTM();
  if (!m || b.width < 1 || b.height < 1) { return null; }
  const pts = [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height],
               [b.x, b.y + b.height]];
  return pts.map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
}
for (const root of roots) {
  root.querySelectorAll('svg text').forEach(t => {
    if (!t.textContent.trim() || !shown(t)) { return; }
    const poly = svgBox(t);
    if (!poly) { return; }
    const svg = t.ownerSVGElement.getBoundingClientRect();
    boxes.push({text: t.textContent.trim().slice(0, 60), poly: poly, svg: [svg.left, svg.top,
                svg.right, svg.bottom], scroll: false});
  });
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.textContent.trim() || !n.parentElement || n.parentElement.closest('svg')) {
      continue;
    }
    if (!shown(n.parentElement)) { continue; }
    const range = document.createRange();
    range.selectNodeContents(n);
    const scroll = !!n.parentElement.closest('.table-responsive');
    const clips = scrollers(n.parentElement);
    for (const r of range.getClientRects()) {
      let [l, t, rr, b] = [r.left, r.top, r.right, r.bottom];
      for (const c of clips) {      // only the part a scrolling box shows can be read
        l = Math.max(l, c.left); t = Math.max(t, c.top);
        rr = Math.min(rr, c.right); b = Math.min(b, c.bottom);
      }
      if (rr - l < 1 || b - t < 1) { continue; }
      boxes.push({text: n.textContent.trim().slice(0, 60), scroll: scroll,
                  poly: [[l, t], [rr, t], [rr, b], [l, b]]});
    }
  }
}
function axes(p) {
  const out = [];
  for (let i = 0; i < p.length; i++) {
    const a = p[i], b = p[(i + 1) % p.length];
    const dx = b[0] - a[0], dy = b[1] - a[1], len = Math.hypot(dx, dy);
    if (len > 0) { out.push([-dy / len, dx / len]); }
  }
  return out;
}
function apart(p, q) {
  for (const ax of axes(p).concat(axes(q))) {
    const pp = p.map(v => v[0] * ax[0] + v[1] * ax[1]);
    const qq = q.map(v => v[0] * ax[0] + v[1] * ax[1]);
    if (Math.min(Math.max(...pp), Math.max(...qq))
        - Math.max(Math.min(...pp), Math.min(...qq)) <= tol) { return true; }
  }
  return false;
}
const overlaps = [], cut = [];
for (let i = 0; i < boxes.length; i++) {
  for (let j = i + 1; j < boxes.length; j++) {
    if (!apart(boxes[i].poly, boxes[j].poly)) {
      overlaps.push(boxes[i].text + '  <>  ' + boxes[j].text);
    }
  }
  const xs = boxes[i].poly.map(v => v[0]), ys = boxes[i].poly.map(v => v[1]);
  const [l, t, r, b] = [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
  if (boxes[i].svg) {
    const [sl, st, sr, sb] = boxes[i].svg;
    if (l < sl - tol || t < st - tol || r > sr + tol || b > sb + tol) {
      cut.push('outside its chart: ' + boxes[i].text);
    }
  }
  if (!boxes[i].scroll && (l < -tol || r > window.innerWidth + tol)) {
    cut.push('outside the window: ' + boxes[i].text);
  }
}
return {boxes: boxes.length, overlaps: overlaps, cut: cut};
"""


def text_problems(driver, selectors: list[str]) -> dict:
    """{"boxes": n, "overlaps": [...], "cut": [...]} for the text under ``selectors``."""
    roots = [el for s in selectors for el in driver.find_elements("css selector", s)]
    return driver.execute_script(TEXT_BOXES_JS, roots, TOLERANCE)
