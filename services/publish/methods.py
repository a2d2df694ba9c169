"""The words of a published page: its methods note, withheld figures, noise in small counts.

Everything here is written from the public answers on the page (their mechanism, ε per group,
band, withheld groups, intervals) so that a reader outside the hospital can tell what the
numbers mean without knowing differential privacy. Nothing is computed from data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dp_engine.bands import NOISE_LABELS
from services.views.answer import ViewAnswer

WITHHELD_WHY = "too few patients to show at this noise level"
MISS_RATE = 20
"""A 95 % interval misses the value computed without noise about 1 time in 20."""
EXAMPLES = 3

HOW = {
    "histogram": ("Counts (histograms)", "a random whole number (discrete Laplace noise) is "
                  "added to every cell, the empty ones too; the result is rounded and never "
                  "shown below 0."),
    "mean": ("Means", "noise is added to the sum of the values, each first held inside a "
             "public range fixed before any data was read, and to the number of patients; "
             "the mean is the one divided by the other."),
    "variance": ("Variances", "noise is added to the number of patients, the sum and the sum "
                 "of squares of the values (each held inside a public range); the variance "
                 "is computed from those noisy numbers."),
    "median": ("Box plots", "the 5th, 25th, 50th, 75th and 95th percentiles are read off a "
               "noisy cumulative count of the patients on a fixed grid of values; the box is "
               "drawn from those numbers only, never from individual patients."),
}
"""Per view: what the noise does, in plain words (the exact mechanism is named beside it)."""

SPREAD = {
    "histogram": "for a histogram, its average count per bin",
    "mean": "for a mean, the group's standard deviation",
    "variance": "for a variance, the group's variance",
    "median": "for a box plot, the group's 90 % range (95th minus 5th percentile)",
}


@dataclass(frozen=True)
class Paragraph:
    """One paragraph of the methods note: a short heading and its text."""

    heading: str
    text: str


def _num(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "–"
    return f"{v:.3g}" if abs(v) < 1e4 else f"{v:,.0f}"


NAMED = 8
"""Most groups named in a sentence; past it the first few and the last stand for the rest."""


def _names(items: Sequence[str]) -> str:
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    if len(items) > NAMED:
        return ", ".join(items[:3]) + " … " + items[-1]
    return ", ".join(items[:-1]) + " and " + items[-1]


def withheld_groups(ans: ViewAnswer) -> list[str]:
    return [g for i, g in enumerate(ans.groups) if i < len(ans.withheld) and ans.withheld[i]]


def all_withheld(ans: ViewAnswer) -> bool:
    """True when no group of the figure has a number: it is shown as a sentence."""
    return bool(ans.groups) and len(withheld_groups(ans)) == len(ans.groups)


def tier_words(ans: ViewAnswer) -> str:
    role = ans.role.replace("_", "-")
    return f"{NOISE_LABELS.get(ans.tier, str(ans.tier))} noise, {role} tier"


def withheld_sentence(ans: ViewAnswer) -> str | None:
    """What stands in for a figure whose every group is withheld (else None)."""
    if not all_withheld(ans):
        return None
    groups = withheld_groups(ans)
    if len(groups) == 1 and groups[0] == "All patients":
        who = "the cohort has"
    else:
        label = ans.group_label.split(" (")[0] or "group"
        every = f"all {len(groups)} groups" if len(groups) > NAMED else "every group"
        verb = "have" if len(groups) > NAMED else "has"
        who = (f"{every} of {label} ({_names(groups)}) {verb}" if len(groups) > 1
               else f"the only group of {label} ({groups[0]}) has")
    return (f"Not shown: {who} {WITHHELD_WHY} ({tier_words(ans)}). A number for "
            f"{'it' if len(groups) == 1 else 'them'} would be mostly noise, so none was "
            "released and no chart is drawn.")


def partly_withheld_sentence(ans: ViewAnswer) -> str | None:
    """The groups of a drawn figure that have no number (else None)."""
    groups = withheld_groups(ans)
    if not groups or all_withheld(ans):
        return None
    many = f"{len(groups)} groups, " if len(groups) > NAMED else ""
    return f"Withheld ({WITHHELD_WHY}): {many}{_names(groups)}. No number is shown for them."


def _reaches_zero(ans: ViewAnswer) -> list[tuple[str, str, float, float, float]]:
    """Shown histogram cells whose 95 % interval reaches 0: (group, cell, value, lo, hi)."""
    out = []
    for g, group in enumerate(ans.groups):
        if g < len(ans.withheld) and ans.withheld[g]:
            continue
        for c, cell in enumerate(ans.cells):
            v, lo, hi = ans.values[g][c], ans.ci_low[g][c], ans.ci_high[g][c]
            if v is not None and lo is not None and hi is not None and lo <= 0:
                out.append((group, cell, float(v), float(lo), float(hi)))
    return out


def small_counts_note(ans: ViewAnswer) -> str | None:
    """For a histogram with cells whose interval reaches 0: what a small count proves (not
    that such patients exist). None when no cell is in doubt or the figure is not counts."""
    if ans.figure != "histogram" or not ans.dp:
        return None
    near = _reaches_zero(ans)
    if not near:
        return None
    shown = sum(len(ans.cells) for g in range(len(ans.groups))
                if not (g < len(ans.withheld) and ans.withheld[g]))
    who = "patients" if ans.privacy_unit == "patient" else "records"
    grouped = len(ans.groups) > 1
    nonzero = [n for n in near if n[2] > 0] or near
    examples = "; ".join(
        f"{cell}{f' ({group})' if grouped else ''}: {_num(v)}, 95 % interval "
        f"{_num(lo)} – {_num(hi)}" for group, cell, v, lo, hi in nonzero[:EXAMPLES])
    text = (f"Small counts: in {len(near)} of {shown} cells the 95 % interval reaches 0 (e.g. "
            f"{examples}). Noise is added to every cell, empty ones included, so a small "
            f"count there may be noise alone: it does not prove that such {who} exist, and a "
            f"0 does not prove that there are none.")
    if shown >= MISS_RATE:
        text += (f" Each interval misses by chance about 1 time in {MISS_RATE}, so a few of "
                 f"these {shown} cells may lie outside theirs.")
    return text


def _range(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return f"ε {_num(lo)}" if math.isclose(lo, hi, rel_tol=5e-3) else \
        f"ε from {_num(lo)} to {_num(hi)}"


def methods_note(answers: Sequence[ViewAnswer], *, total_epsilon: float,
                 budget_role: str) -> list[Paragraph]:
    """The page's methods note in plain words, from the answers on it (in page order)."""
    dp = [a for a in answers if a.dp]
    if not dp:
        return []
    shown = [a for a in dp if not all_withheld(a)]
    eps = [float(a.epsilon) for a in shown if a.epsilon and math.isfinite(a.epsilon)]
    paragraphs = [Paragraph(
        "What the numbers are",
        "Every number on this page is a differentially private (DP) release: random noise of "
        "a known size was added to statistics of the hospital's records before they left the "
        "hospital, so that no single patient's presence or absence can be told from the page. "
        "No number here is shown without that noise.")]
    spent = (f" The figures here used {_range(eps)} each; together the page cost ε "
             f"{_num(total_epsilon)}, charged once to the {budget_role} budget when they were "
             "released. Opening, presenting or exporting the page costs nothing more."
             if eps else "")
    paragraphs.append(Paragraph(
        "What ε means",
        "ε (epsilon) bounds how much any one patient can change what is shown: the smaller "
        "ε, the more noise and the stronger the protection. Within a figure each group of "
        "patients gets its own ε (the groups hold different patients, so the figure costs "
        "the largest)." + spent))
    count = sum(len(a.cells) * (len(a.groups) - len(withheld_groups(a))) for a in shown)
    paragraphs.append(Paragraph(
        "What the 95 % intervals mean",
        "Each number comes with a 95 % interval: the range that holds the number computed "
        "without noise in 95 out of 100 releases. It covers the added noise only, not how the "
        "patients came to be in the cohort." + (
            f" With {count} numbers on this page, a few intervals (about 1 in {MISS_RATE}) "
            "may miss by chance." if count >= MISS_RATE else "")))
    views = list(dict.fromkeys(a.view for a in shown))
    how = []
    for view in views:
        if view not in HOW:
            continue
        name, words = HOW[view]
        mechanism = next(a.mechanism_label for a in shown if a.view == view)
        how.append(f"{name}: {words} Mechanism: {mechanism}.")
    if how:
        paragraphs.append(Paragraph("How the noise was added", " ".join(how)))
    lo_hi = {tuple(a.band) for a in shown}
    if shown and len(lo_hi) == 1:
        lo, hi = next(iter(lo_hi))
        band = f"{lo:g}–{hi:g} %"
        tier = tier_words(shown[0])
        spreads = "; ".join(SPREAD[v] for v in views if v in SPREAD)
        paragraphs.append(Paragraph(
            "How precise",
            f"The noise was set so that each group's expected error is {band} of the group's "
            f"own spread ({tier}): {spreads}. It is not a percentage of the value itself. "
            "The spreads come from earlier DP releases of the same records, never from the "
            "data directly; each figure's table lists every number with its interval."))
    withheld = [g for a in dp for g in withheld_groups(a)]
    if withheld:
        paragraphs.append(Paragraph(
            "Withheld groups",
            f"A group with {WITHHELD_WHY} is withheld: no number is shown for it, since "
            "the noise needed to protect its patients would drown it."))
    units = {(a.privacy_unit, a.contribution) for a in dp}
    if len(units) == 1:
        unit, k = next(iter(units))
        paragraphs.append(Paragraph(
            "Who is protected",
            f"The protection is per patient: each patient contributes at most {k} "
            f"row{'s' if k != 1 else ''} to any number." if unit == "patient" else
            "Each row of the hospital's table is treated as one patient: a patient with "
            "several rows is protected less than one with a single row."))
    return paragraphs


def error_definition(answers: Sequence[ViewAnswer]) -> str:
    """The exact definition of relative error the answers state (the first one given)."""
    return next((a.error_definition for a in answers if a.error_definition), "")
