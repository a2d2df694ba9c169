"""One CSV of a whole published page: every figure's DP numbers with intervals, ε, mechanism.

Built from the page's stored public answers only (as opened for its reader); every text cell
goes through ``services.csv_safe`` so a caption or a category cannot run as a formula.
"""

from __future__ import annotations

from dp_engine.bands import NOISE_LABELS
from services.csv_safe import rows_csv
from services.publish.methods import WITHHELD_WHY
from services.views.report import cells, finite_number, query_words

PAGE_CSV_HEADER = ["page", "figure", "caption", "dataset", "dataset_version", "query", "group",
                   "cell", "value", "ci95_low", "ci95_high", "group_epsilon", "figure_epsilon",
                   "mechanism", "noise_tier", "differentially_private", "withheld",
                   "release_id"]


def page_csv(opened) -> str:
    """The CSV of an opened page (``services.publish.service.Opened``), one row per
    (figure, group, cell) in page order; a withheld group's rows have no value."""
    rows = []
    for n, fig in enumerate(opened.figures, start=1):
        rel, ans = fig.release, fig.answer
        stored = rel.answer
        group_eps = list(ans.group_epsilon) or [ans.epsilon] * len(ans.groups)
        withheld = list(ans.withheld) or [False] * len(ans.groups)
        position = {g: i for i, g in enumerate(ans.groups)}
        for c in cells(stored):
            g = position.get(c["group"], -1)
            gone = 0 <= g < len(withheld) and bool(withheld[g])
            rows.append([
                opened.page.title, n, fig.ref.caption or query_words(stored), rel.dataset_id,
                rel.dataset_version, query_words(stored), c["group"], c["cell"],
                None if gone else c["value"], None if gone else c["ci95_low"],
                None if gone else c["ci95_high"],
                None if gone or g < 0 or g >= len(group_eps) else finite_number(group_eps[g]),
                finite_number(ans.epsilon), ans.mechanism_label or rel.mechanism,
                NOISE_LABELS.get(rel.tier, str(rel.tier)), "yes" if rel.dp else "no",
                WITHHELD_WHY if gone else "", rel.id])
    return rows_csv(PAGE_CSV_HEADER, rows)
