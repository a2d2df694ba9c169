"""A published page as one self-contained HTML file: plotly.js inlined, figures inline.

Nothing in the file is fetched: no CDN, font or image; its Content-Security-Policy forbids
every request, so it opens from disk with the network off. Figures and tables are the same as
the page's (layouts/publish/view.py: the cohort, the methods note, a sentence for a figure
whose every group is withheld, the notes under each chart, ``table_model``).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from layouts.components.figures import FONT
from layouts.publish.view import (
    chart_title,
    cohort_rows,
    figure_label,
    figure_notes,
    methods_paragraphs,
    published_figure,
    table_model,
    total_text,
)
from services.publish import methods
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


def _cohort(opened: Opened) -> str:
    e = html.escape
    items = "".join(f"<dt>{e(term)}</dt><dd>{e(text).replace(chr(10), '<br>')}</dd>"
                    for term, text in cohort_rows(opened))
    return f"<section><h2>The cohort</h2><dl>{items}</dl></section>"


def _methods(opened: Opened) -> str:
    e = html.escape
    paragraphs = "".join(f"<p><strong>{e(p.heading)}.</strong> {e(p.text)}</p>"
                         for p in methods_paragraphs(opened))
    definition = methods.error_definition([f.answer for f in opened.figures])
    more = (f"<details><summary>The exact definition of relative error</summary>"
            f"<p>{e(definition)}</p></details>" if definition else "")
    return f"<section><h2>How to read these numbers</h2>{paragraphs}{more}</section>"


def page_html(opened: Opened, config: dict[str, Any]) -> str:
    """The whole page (cohort, methods note, figures with their labels, notes and data
    tables, total cost) as one HTML document."""
    e = html.escape
    p = opened.page
    plotly = PLOTLY_JS.read_text(encoding="utf-8").replace("</script", "<\\/script")
    sections, figures = [], []
    for n, fig in enumerate(opened.figures):
        head = (f"<h2>{e(fig.ref.caption or f'Figure {n + 1}')}</h2>"
                f"<p class='title'>{e(chart_title(fig.answer))}</p>")
        label = f"<p class='label'>{e(figure_label(fig))}</p>"
        sentence = methods.withheld_sentence(fig.answer)
        if sentence:
            sections.append(f"<section>{head}<p class='withheld'>{e(sentence)}</p>{label}"
                            "</section>")
            continue
        notes = "".join(f"<p class='note'>{e(t)}</p>" for t in figure_notes(fig.answer))
        sections.append(f"<section>{head}<div id='fig-{len(figures)}' class='figure'></div>"
                        f"{notes}{label}{_table(*table_model(fig))}</section>")
        figures.append(published_figure(fig.answer))
    cfg = {**config, "responsive": True, "displaylogo": False}
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(p.title)}</title>
<style>
body {{ font-family: {FONT}; margin: 2rem auto; max-width: 60rem; padding: 0 1rem;
  color: #1d2733; }}
section {{ border: 1px solid #dde3ea; border-radius: 6px; padding: 1rem; margin: 1rem 0; }}
.figure {{ height: 460px; }} .label, .meta, .note {{ color: #4a5563; font-size: .9rem; }}
.withheld {{ background: #fff4e5; border-left: 4px solid #b35c00; padding: .5rem .75rem; }}
dt {{ font-weight: 600; }} dd {{ margin: 0 0 .4rem 0; }}
table {{ border-collapse: collapse; font-size: .85rem; display: block; overflow-x: auto; }}
th, td {{ border: 1px solid #dde3ea; padding: .2rem .5rem; text-align: left; }}
</style></head><body>
<h1>{e(p.title)}</h1>
<p class="meta">{e(p.audience.label)} · {e(p.tier_role.label.lower())} noise tier ·
exported from the Private Cohort Explorer; every number is a differentially private
release of the hospital's privacy ledger.</p>
{_cohort(opened)}
{_methods(opened)}
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
