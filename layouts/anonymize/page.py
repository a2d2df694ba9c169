"""Anonymize page (owner only): cluster-based k-anonymity with a risk and utility report.

Layout and report rendering only; the computation lives in ``dp_engine.anonymize`` and the
wiring in ``callbacks.anonymize``.
"""

from __future__ import annotations

import math

import dash_bootstrap_components as dbc
from dash import dcc, html

from dp_engine.anonymize import LABEL, AnonymizationResult
from dp_engine.schema import ColumnKind, ColumnRole, Schema
from layouts import ids
from layouts.anonymize.figures import empty_figure
from layouts.components.accessible import chart, field

ANONYMIZABLE_KINDS = frozenset({ColumnKind.NUMERIC, ColumnKind.ORDINAL, ColumnKind.CATEGORICAL,
                                ColumnKind.BOOLEAN, ColumnKind.DATE})
METHODS = {"hybrid": "Hybrid: VQ outliers pushed in, MDAV groups, exact k (default)",
           "vq": "Vector quantization only (paper; k not guaranteed)",
           "mdav": "MDAV microaggregation (baseline)"}
SENSITIVE_MODES = {"flatten": "Flatten to the group's centroid (Eq. 9)",
                   "shuffle": "Shuffle within the group, KL-bounded (Eq. 10)"}
DEFAULT_K = 5


def message(text: str | list, color: str = "info") -> dbc.Alert:
    return dbc.Alert(text, color=color, className="small", dismissable=True)


def column_options(schema: Schema) -> list[dict]:
    """Columns that may be quasi-identifiers or sensitive (no identifiers, no free text)."""
    return [{"label": c.display, "value": c.name} for c in schema.columns
            if c.kind in ANONYMIZABLE_KINDS and c.role is not ColumnRole.DIRECT_IDENTIFIER]


def default_columns(schema: Schema, role: ColumnRole) -> list[str]:
    allowed = {o["value"] for o in column_options(schema)}
    return [c.name for c in schema.columns if c.role is role and c.name in allowed]


def axis_options(schema: Schema, qis: list[str]) -> list[dict]:
    """The chosen quasi-identifiers, ordered kinds first (they make the clearest scatter)."""
    order = {ColumnKind.NUMERIC: 0, ColumnKind.DATE: 1, ColumnKind.ORDINAL: 2}
    specs = [schema.column(q) for q in qis if q in schema]
    specs.sort(key=lambda c: order.get(c.kind, 3))
    return [{"label": c.display, "value": c.name} for c in specs]


def _radio(label: str, cid: str, value: str, choices: dict[str, str]) -> html.Fieldset:
    options = [{"label": text, "value": key} for key, text in choices.items()]
    return field(label, dbc.RadioItems(id=cid, value=value, options=options))


def layout(registry, identity) -> html.Div | dbc.Alert:
    """The page (the owner's only: ``callbacks.guard`` refuses anyone else)."""
    datasets = registry.list()
    if not datasets:
        return dbc.Alert("No dataset is loaded yet; add one on the Data page.", color="info")
    first = datasets[0]
    schema = first.schema
    qis = default_columns(schema, ColumnRole.QUASI_IDENTIFIER)
    axes = axis_options(schema, qis)
    controls = [
        field("Dataset", dcc.Dropdown(
            id=ids.AN_DATASET, clearable=False, value=first.id,
            options=[{"label": d.title or d.id, "value": d.id} for d in datasets])),
        field("Quasi-identifiers",
              dcc.Dropdown(id=ids.AN_QIS, multi=True, value=qis, options=column_options(schema)),
              "Columns an outsider could know (age, year, department). Missing values are kept "
              "as a value of their own."),
        field("Sensitive columns", dcc.Dropdown(
            id=ids.AN_SENSITIVE, multi=True, value=default_columns(schema, ColumnRole.SENSITIVE),
            options=column_options(schema))),
        field("k (smallest group size)",
              dbc.Input(id=ids.AN_K, type="number", min=2, max=100, step=1, value=DEFAULT_K)),
        _radio("Method", ids.AN_METHOD, "hybrid", METHODS),
        _radio("Sensitive columns within a group", ids.AN_SENSITIVE_MODE, "flatten",
               SENSITIVE_MODES),
        dbc.Button("Anonymize", id=ids.AN_RUN, color="primary", className="me-2"),
        dbc.Button("Download anonymized CSV", id=ids.AN_DOWNLOAD_BTN, color="secondary",
                   disabled=True),
        dcc.Download(id=ids.AN_DOWNLOAD),
        dcc.Store(id=ids.AN_STORE),
    ]
    scatter_controls = dbc.Row([
        dbc.Col(field("Horizontal axis", dcc.Dropdown(
            id=ids.AN_SCATTER_X, clearable=False, options=axes,
            value=axes[0]["value"] if axes else None)), md=6),
        dbc.Col(field("Vertical axis", dcc.Dropdown(
            id=ids.AN_SCATTER_Y, clearable=False, options=axes,
            value=axes[min(1, len(axes) - 1)]["value"] if axes else None)), md=6),
    ])
    return html.Div([
        html.H1("Anonymize a cohort", className="h4"),
        dbc.Alert([html.Strong(LABEL.capitalize() + ". "),
                   "Records are grouped so each released combination of quasi-identifiers is "
                   "shared by at least k patients (Miche et al., vector quantization, with "
                   "MDAV). This protects against re-identification by linkage, not against "
                   "every inference; no ε is spent and nothing here is differentially private."],
                  color="secondary", className="small"),
        dbc.Row([
            dbc.Col(controls, md=4),
            dbc.Col([html.Div(id=ids.AN_MESSAGE, role="status", **{"aria-live": "polite"}),
                     dcc.Loading(html.Div(id=ids.AN_REPORT)),
                     scatter_controls,
                     chart(empty_figure(), ids.AN_SCATTER, table_id=ids.AN_SCATTER_TABLE)],
                    md=8),
        ]),
    ])


def _fmt(x: float, digits: int = 2, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.{digits}f} %" if pct else f"{x:.{digits}f}"


def _card(title: str, value: str, note: str = "", color: str | None = None) -> dbc.Col:
    body = [html.Div(title, className="small text-muted"), html.Div(value, className="h5 mb-0")]
    if note:
        body.append(html.Div(note, className="small text-muted"))
    return dbc.Col(dbc.Card(dbc.CardBody(body), color=color, outline=bool(color)), md=3,
                   className="mb-2")


def report_view(result: AnonymizationResult, labels: dict[str, str]) -> html.Div:
    """Cards and tables for one anonymization (owner only)."""
    r = result.report
    ok = r.k_anonymous
    cards = dbc.Row([
        _card("k achieved", f"{r.k_achieved} (target {r.k_target})",
              "every released combination shared by ≥ k records" if ok
              else "below target: quasi-identifiers are not flattened by this method",
              "success" if ok else "danger"),
        _card("Unique records", f"{r.unique_before:.1%} → {r.unique_after:.1%}",
              "share with a unique quasi-identifier combination"),
        _card("SSE/SST", _fmt(r.sse_sst_pct, pct=True), "information loss, z-scored"),
        _card("IL1s", _fmt(r.il1s, 3), "mean |change| / (√2 sd)"),
        _card("Groups / classes", f"{r.n_groups} / {r.n_classes}", f"{r.n_records} records"),
        *[_card(f"Distance to centroid ({part})", f"KL {_fmt(r.distance_kl[part], 3)}",
                f"Wasserstein {_fmt(r.distance_wasserstein[part], 3)}")
          for part in r.distance_kl],
    ])
    parts: list = [html.H3(f"Report — {LABEL}", className="h6 mt-2"), cards]
    if r.l_diversity:
        rows = [html.Tr([html.Td(labels.get(c, c)), html.Td(r.l_diversity[c]),
                         html.Td(r.l_diversity_true[c])]) for c in r.l_diversity]
        head = html.Tr([html.Th("Sensitive column"), html.Th("ℓ (distinct released values)"),
                        html.Th("ℓ (distinct true values)")])
        parts.append(dbc.Table([html.Thead(head), html.Tbody(rows)], size="sm", bordered=True,
                               className="small"))
        parts.append(html.Div(
            "ℓ is the smallest number of distinct values within one released class. "
            "Flattening gives a whole group one value, so its released ℓ is 1 by "
            "construction; the true-value ℓ shows what someone who links a person to a "
            "class could still infer (1 means the class shares one true value).",
            className="small text-muted mb-2"))
    if not r.cluster_stats.empty:
        stats = r.cluster_stats.copy()
        stats["column"] = [labels.get(c, c) for c in stats["column"]]
        parts.append(html.Div("Group means and variances, before vs after",
                              className="small fw-semibold"))
        parts.append(dbc.Table.from_dataframe(stats.round(3), size="sm", bordered=True,
                                              className="small"))
    notes = list(result.notes)
    if result.radii:
        radii = ", ".join(f"{labels.get(c, c)} {r:.3g}" for c, r in result.radii.items())
        notes.append(f"Cluster radii (Eq. 2, mapped units): {radii}.")
    if result.move is not None:
        notes.append(f"{result.move.n_outliers} outlier records moved into a cluster; "
                     f"{result.move.values_changed} of their values changed (Eq. 5).")
    if notes:
        parts.append(html.Ul([html.Li(n) for n in notes], className="small text-muted"))
    return html.Div(parts)
