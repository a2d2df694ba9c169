"""The Data page's editable schema table: one row per column, for the owner's edits.

Confirming happens in the checklist (``layouts/data/checklist.py``); the table is where one
column is changed (an edit makes that column the owner's choice). Dropdown menus of the last
rows open upwards, so the last row's menu is usable without scrolling the page.
"""

from __future__ import annotations

from dash import dash_table

from dp_engine.schema import ColumnKind, ColumnRole, Schema
from layouts import ids
from services.data.review import DataReview, readable

FLAG = "derived from the data — not private"
HIDDEN = "never shown to non-owners"
CATEGORY_SEP = "; "
UPWARD_ROWS = 4  # the last rows' dropdown menus open upwards

SCHEMA_COLUMNS = [  # what the owner edits, with the clamp counts beside the bounds
    ("name", "Column", False), ("flag", "Status", False),
    ("lower", "Lower bound", True), ("clamp_low", "Clamped up to it", False),
    ("upper", "Upper bound", True), ("clamp_high", "Clamped down to it", False),
    ("categories", "Categories (; separated, 'code = label' to name a code)", True),
    ("missing_codes", "Missing-value codes (; separated)", True),
    ("kind", "Kind", True), ("role", "Role", True), ("label", "Label", True),
    ("unit", "Unit", True), ("bin_width", "Bin width", True),
    ("review", "What the data shows (owner only)", False),
]


def _clamp(count: int, bound: float | None) -> str:
    return "" if bound is None else str(count)


def schema_rows(schema: Schema, review: DataReview | None = None) -> list[dict[str, str]]:
    """One editable table row per column; flagged columns carry the FLAG status.

    With the owner's ``review``: the values each bound clamps and what the data shows.
    """
    rows = []
    for c in schema.columns:
        status = FLAG if c.derived_from_data else (HIDDEN if not c.queryable else "")
        cats = CATEGORY_SEP.join(_level(v) for v in c.categories) if c.categories else ""
        r = review.column(c.name) if review is not None else None
        rows.append({
            "name": c.name, "kind": c.kind.value, "role": c.role.value, "label": c.label,
            "unit": c.unit, "lower": readable(c.lower), "upper": readable(c.upper),
            "clamp_low": _clamp(r.clamped_below, c.lower) if r else "",
            "clamp_high": _clamp(r.clamped_above, c.upper) if r else "",
            "bin_width": readable(c.bin_width),
            "categories": "" if c.kind is ColumnKind.BOOLEAN else cats,
            "missing_codes": CATEGORY_SEP.join(c.missing_codes),
            "review": " ".join(review.notes(c.name)) if review is not None else "",
            "flag": status,
        })
    return rows


def _level(value: object) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return readable(value)
    return str(value)


def schema_table(rows: list[dict[str, str]]) -> dash_table.DataTable:
    dropdown = {name: {"options": [{"label": v.value, "value": v.value} for v in enum],
                       "clearable": False}
                for name, enum in (("kind", ColumnKind), ("role", ColumnRole))}
    upward = f"tr:nth-last-child(-n+{UPWARD_ROWS}) .Select-menu-outer"
    return dash_table.DataTable(
        id=ids.DATA_TABLE, data=rows, dropdown=dropdown, editable=True,
        columns=[{"id": key, "name": name, "editable": editable,
                  **({"presentation": "dropdown"} if key in dropdown else {})}
                 for key, name, editable in SCHEMA_COLUMNS],
        style_table={"overflowX": "auto"},
        style_cell={"fontSize": "0.85rem", "textAlign": "left", "whiteSpace": "normal",
                    "height": "auto", "minWidth": "5rem", "verticalAlign": "top"},
        style_cell_conditional=[
            {"if": {"column_id": "review"}, "minWidth": "24rem"},
            {"if": {"column_id": "categories"}, "minWidth": "12rem"},
            *({"if": {"column_id": c}, "minWidth": "9rem"} for c in ("kind", "role")),
        ],
        style_header={"fontWeight": "bold"},
        style_data_conditional=[
            {"if": {"filter_query": '{flag} contains "derived"'},
             "backgroundColor": "#fff3cd", "fontWeight": "bold"},
            {"if": {"filter_query": '{flag} contains "never"'}, "color": "#595959"},
            {"if": {"filter_query": '{review} != ""', "column_id": "review"},
             "backgroundColor": "#fde2e1"},
        ],
        css=[{"selector": ".Select-menu-outer", "rule": "display: block !important"},
             {"selector": upward, "rule": "top: auto !important; bottom: 100% !important"}],
    )
