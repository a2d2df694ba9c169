"""A published page as one self-contained HTML file: plotly.js inlined, figures inline.

Nothing in the file is fetched: no CDN, font or image; its Content-Security-Policy forbids
every request, so it opens from disk with the network off. Figures and tables are the same as
the page's (layouts/components/figures.py, ``table_model``).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from layouts.components.figures import FONT, build
from layouts.publish.page import figure_label, table_model, total_text
from services.publish.service import Opened

PLOTLY_JS = Path(__file__).resolve().parents[2] / "assets" / "01-plotly-cartesian.min.js"
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data:; font-src 'none'; connect-src 'none'; form-action 'none'")


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element (no '</script>' or '<!--' can close it)."""
    return (json.dumps(value, allow_nan=False, separators=(",", ":"))
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _table(header: list[str], rows: list[list[str]]) -> str:
    e = html.escape
    head = "".join(f"<th scope='col'>{e(h)}</th>" for h in header)
    body = "".join("<tr><th scope='row'>" + e(r[0]) + "</th>"
                   + "".join(f"<td>{e(c)}</td>" for c in r[1:]) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def page_html(opened: Opened, config: dict[str, Any]) -> str:
    """The whole page (figures, labels, data tables, total cost) as one HTML document."""
    e = html.escape
    p = opened.page
    plotly = PLOTLY_JS.read_text(encoding="utf-8").replace("</script", "<\\/script")
    sections, figures = [], []
    for n, fig in enumerate(opened.figures):
        sections.append(
            f"<section><h2>{e(fig.ref.caption or f'Figure {n + 1}')}</h2>"
            f"<div id='fig-{n}' class='figure'></div>"
            f"<p class='label'>{e(figure_label(fig))}</p>{_table(*table_model(fig))}</section>")
        figures.append(build(fig.answer))
    cfg = {**config, "responsive": True, "displaylogo": False}
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(p.title)}</title>
<style>
body {{ font-family: {FONT}; margin: 2rem auto; max-width: 60rem; color: #1d2733; }}
section {{ border: 1px solid #dde3ea; border-radius: 6px; padding: 1rem; margin: 1rem 0; }}
.figure {{ height: 460px; }} .label, .meta {{ color: #4a5563; font-size: .9rem; }}
table {{ border-collapse: collapse; font-size: .85rem; }}
th, td {{ border: 1px solid #dde3ea; padding: .2rem .5rem; text-align: left; }}
</style></head><body>
<h1>{e(p.title)}</h1>
<p class="meta">{e(p.audience.label)} · {e(p.tier_role.label.lower())} noise tier ·
exported from the Private Cohort Explorer; every number is a differentially private
release of the hospital's privacy ledger.</p>
<p><strong>{e(total_text(opened))}</strong></p>
{''.join(sections)}
<script>{plotly}</script>
<script>
var figures = {_script_json(figures)};
var config = {_script_json(cfg)};
figures.forEach(function (f, n) {{
  Plotly.newPlot('fig-' + n, f.data, f.layout, config);
}});
</script>
</body></html>
"""
