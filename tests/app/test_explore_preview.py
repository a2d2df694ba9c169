"""Preview, then release (issue 11): previews are free and show nothing private; Release spends
exactly the quoted ε; My releases reopen free; exports equal the figure; the screen matches the
controls; the dataset cap refuses non-owners with nothing charged."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pandas as pd
import pytest

from layouts import ids
from layouts.components.figures import fmt
from services.identity.roles import Role
from tests.app.explore_client import PRICED, post, preset, preview, price, render, reopen

COLLAB = {"role": "collaborator"}


def _services(app):
    from app import services_of

    return services_of(app)


def _numbers(node) -> list[float]:
    """Every finite number in a JSON tree (figures, panels)."""
    out: list[float] = []
    if isinstance(node, dict):
        for v in node.values():
            out += _numbers(v)
    elif isinstance(node, list):
        for v in node:
            out += _numbers(v)
    elif isinstance(node, int | float) and not isinstance(node, bool) and np.isfinite(node):
        out.append(float(node))
    return out


def _spent(app, user="test-collaborator") -> tuple[float, float]:
    st = _services(app).ledger.status(role=Role.COLLABORATOR, dataset_id="pirads", user=user)
    return st.role.spent, st.user.spent


def _cost(label: str) -> str:
    match = re.search(r"ε ([0-9.]+)", label)
    assert match, label
    return match.group(1)


@pytest.fixture
def collaborator(explore_app, session):
    session.set(Role.COLLABORATOR)
    return explore_app


def test_four_control_changes_preview_free_then_release_spends_the_shown_epsilon(
        collaborator, client):
    steps = [(ids.EX_VIEW, {"view": "mean", "group": "none"}),
             (ids.EX_GROUP, {"view": "mean", "group": "PIRADS score"}),
             (ids.EX_VIEW, {"view": "variance", "group": "PIRADS score"}),
             (ids.EX_GROUP, {"view": "variance", "group": "Prostatitis"})]
    ledger = _services(collaborator).ledger
    preview(client, ids.EX_VIEW, **COLLAB, view="mean", group="none")   # calibration, once
    loss_before = ledger.dataset_loss("pirads")
    for changed, values in steps:
        reply = preview(client, changed, **COLLAB, **values)
        assert reply.status == 200, reply.text
        assert reply.preview and reply.figures(), reply.message
        text = json.dumps(reply.body, ensure_ascii=False).lower()
        assert "preview — simulated, not your patients" in text
        assert "PREVIEW" in reply.figures()[0]["layout"]["title"]["text"]
        assert "estimate" not in reply.panel_text     # an exact price, never a guess
        if values["group"] == "none":                 # its exact price at once
            assert reply.release_label.startswith("Release (ε "), reply.release_label
        else:   # a grouping nobody priced: pricing it is an exact, deliberate step
            assert reply.release_label == "Price this grouping (ε 0.25)"
            assert "at most ε 2" in reply.panel_text   # the view's bound: the ceiling
        assert "Budget after this release" in reply.panel_text
        assert _spent(collaborator) == (0.0, 0.0)
        assert ledger.dataset_loss("pirads") == loss_before   # previews draw nothing at all
    priced = price(client, **COLLAB, **steps[-1][1])
    assert PRICED in priced.text and priced.preview
    assert priced.release_label.startswith("Release (ε "), priced.release_label
    assert _spent(collaborator) == (0.25, 0.25)        # pricing: the sizes, from the budget
    assert ledger.dataset_loss("pirads") == pytest.approx(loss_before + 0.25)
    shown = _cost(priced.release_label)
    released = render(client, **COLLAB, **steps[-1][1])
    assert not released.preview and released.figures()
    role_spent, user_spent = _spent(collaborator)
    assert role_spent == user_spent and fmt(role_spent - 0.25) == shown   # as shown
    rel, sizes = ledger.releases(dataset_id="pirads")
    assert sizes.query_key.startswith("internal:sizes:Prostatitis")
    assert released.release_ids() == [str(rel.id)]
    assert rel.epsilon == pytest.approx(role_spent - 0.25)
    # My releases lists it; reopening is free and sets the controls to it
    options = released.reopen_options()
    assert [o["value"] for o in options] == [str(rel.id)]
    assert "variance of Age by Prostatitis" in options[0]["label"]
    again = reopen(client, str(rel.id), **COLLAB, view="histogram", group="none")
    assert json.dumps(again.figures()[0]["data"]) == json.dumps(released.figures()[0]["data"])
    assert again.prop(ids.EX_VIEW, "value") == "variance"
    assert again.prop(ids.EX_GROUP, "value") == "Prostatitis"
    assert _spent(collaborator) == (role_spent, user_spent)
    # a control change back to a released view opens it at once, free
    opened = preview(client, ids.EX_GROUP, **COLLAB, **steps[-1][1])
    assert not opened.preview and "Released" in opened.release_label
    assert _spent(collaborator) == (role_spent, user_spent)


def _truth(app, view: str, group: str) -> np.ndarray:
    """The true statistic per group, from the private rows (clamped to the public bounds)."""
    services = _services(app)
    frame = services.registry.get("pirads", owner=True).frame
    sub = frame[["Age", group]].dropna()
    ages = pd.to_numeric(sub["Age"]).clip(*services.registry.get("pirads").schema
                                          .column("Age").bounds())
    stat = {"mean": "mean", "variance": lambda s: s.var(ddof=0),
            "median": "median"}[view]
    truth = ages.groupby(sub[group]).agg(stat).to_numpy(dtype=float)
    return truth


def _released_values(app) -> np.ndarray:
    (rel,) = _services(app).ledger.releases(dataset_id="pirads", limit=1)
    return np.asarray(_numbers(rel.answer["values"]) + _numbers(rel.answer["ci_low"])
                      + _numbers(rel.answer["ci_high"]))


@pytest.mark.parametrize(("view", "group"), [("mean", "PIRADS score"),
                                              ("variance", "Prostatitis"),
                                              ("mean", "none")])
def test_a_preview_contains_no_value_derived_from_private_rows(collaborator, client, view,
                                                               group):
    shown = preview(client, ids.EX_VIEW, **COLLAB, view=view, group=group)
    assert shown.status == 200 and shown.preview, shown.message
    numbers = np.asarray(_numbers([f["data"] for f in shown.figures()])
                         + _numbers(shown.prop(ids.EX_PANEL)))
    truth = _truth(collaborator, view, group if group != "none" else "Prostatitis")
    if group == "none":
        ages = _services(collaborator).registry.get("pirads").frame["Age"].dropna()
        truth = np.append(truth, ages.clip(30, 90).mean())
    render(client, **COLLAB, view=view, group=group)      # the DP answer, made after
    dp = _released_values(collaborator)
    bounds = _services(collaborator).registry.get("pirads").schema.column("Age").bounds()
    dp = dp[~np.isin(dp, bounds)]                 # intervals clipped to the public bounds
    assert truth.size and dp.size
    for secret in (*truth, *dp):
        assert not np.isclose(numbers, secret, rtol=1e-9, atol=0).any(), secret


def test_a_box_plot_preview_is_not_the_private_one(collaborator, client):
    """Quantiles live on a public candidate grid, so single values may coincide by chance;
    the preview's quantiles as a whole are neither the true nor the released ones."""
    shown = preview(client, ids.EX_VIEW, **COLLAB, view="median", group="PIRADS score")
    boxes = [[t[k][0] for k in ("lowerfence", "q1", "median", "q3", "upperfence")]
             for t in shown.figures()[0]["data"] if t["type"] == "box"]
    render(client, **COLLAB, view="median", group="PIRADS score")
    (rel,) = _services(collaborator).ledger.releases(dataset_id="pirads", limit=1)
    released = [row for row in rel.answer["values"] if None not in row]
    assert boxes and released and boxes != released


def test_the_same_controls_draw_the_same_preview(collaborator, client):
    a = preview(client, ids.EX_VIEW, **COLLAB, view="mean")
    b = preview(client, ids.EX_GROUP, **COLLAB, view="mean")
    assert json.dumps(a.figures(), sort_keys=True) == json.dumps(b.figures(), sort_keys=True)


def test_exports_equal_the_figure_and_name_the_release(collaborator, client):
    from callbacks.explore import export

    reply = render(client, **COLLAB, view="mean", group="PIRADS score")
    (rid,) = reply.release_ids()
    bars = reply.figures()[0]["data"][0]
    services = _services(collaborator)
    sent = export(services, "csv", rid)
    rows = list(csv.DictReader(io.StringIO(sent["content"])))
    assert [r["group"] for r in rows] == bars["y"]
    assert [float(r["value"]) for r in rows] == pytest.approx(bars["x"], rel=1e-12)
    assert {r["mechanism"] for r in rows} and all(r["epsilon"] for r in rows)
    report = json.loads(export(services, "report", rid)["content"])
    assert [v["value"] for v in report["values"]] == pytest.approx(bars["x"], rel=1e-12)
    assert report["query"]["words"] == "mean of Age by PI-RADS score"
    assert report["released_to"] == report["exported_by"] == "test-collaborator"
    assert report["dataset"]["version"] and report["epsilon"] > 0
    lows = [r["ci95_low"] for r in report["values"]]
    assert all(lo is not None and lo <= v for lo, v in zip(lows, bars["x"], strict=True))


def test_exports_and_reopen_refuse_another_roles_release(explore_app, client, session):
    from callbacks.explore import export

    session.set(Role.COLLABORATOR)
    (rid,) = render(client, **COLLAB, view="mean").release_ids()
    session.set(Role.THIRD_PARTY)
    services = _services(explore_app)
    from dash import no_update

    assert export(services, "csv", rid) is no_update
    assert export(services, "report", "1 OR 1=1") is no_update
    refused = reopen(client, rid, role="third_party", view="mean")
    assert refused.figures() == [] and "not one of your role" in refused.message


def test_presets_release_in_one_click_and_the_control_follows_the_screen(collaborator,
                                                                          client, monkeypatch):
    from services.views import inputs, plan_store

    monkeypatch.setattr(inputs, "_plans", {})     # this test's plans only (one per ledger)
    asked = preset(client, "fig3", **COLLAB)      # its grouping is not priced yet
    assert asked.preview and "Price this grouping" in asked.text and _spent(collaborator) == (
        0.0, 0.0)
    labels = {o["value"]: o["label"] for o in asked.prop(ids.EX_PRESET, "options")}
    assert "price its grouping first (ε 0.25)" in labels["fig4"]
    price(client, **COLLAB, view="mean", group="PIRADS score")
    chosen = preset(client, "fig3", **COLLAB)
    assert chosen.figures() and not chosen.preview, chosen.message
    assert chosen.prop(ids.EX_VIEW, "value") == "mean"
    spent, _ = _spent(collaborator)
    assert spent > 0.25
    labels = {o["value"]: o["label"] for o in chosen.prop(ids.EX_PRESET, "options")}
    assert "released: opens free" in labels["fig3"]
    free = preview(client, ids.EX_VIEW, **COLLAB, view="median", group="Prostatitis")
    labels = {o["value"]: o["label"] for o in free.prop(ids.EX_PRESET, "options")}
    assert "price its grouping first" in labels["fig4"]         # a preview draws nothing
    priced = price(client, **COLLAB, view="median", group="Prostatitis")
    labels = {o["value"]: o["label"] for o in priced.prop(ids.EX_PRESET, "options")}
    assert re.search(r"· ε [0-9.]+$", labels["fig4"]), labels["fig4"]
    spent += 0.25                                   # pricing Prostatitis took its sizes
    assert _spent(collaborator)[0] == pytest.approx(spent)
    # a screen of answers the role has never plans a quantile view for a label: it reads
    # the plan another worker stored, or says the price is shown when chosen
    real = inputs.sound.plan_tiers

    def never(statistic, *args, **kwargs):
        if statistic == "quantiles":
            raise AssertionError("a quantile view was planned for a label")
        return real(statistic, *args, **kwargs)

    inputs._plans.clear()                         # as in a worker that never planned fig4
    with monkeypatch.context() as m:
        m.setattr(inputs.sound, "plan_tiers", never)
        again = preset(client, "fig3", **COLLAB)
        labels = {o["value"]: o["label"] for o in again.prop(ids.EX_PRESET, "options")}
        assert "Opened free" in again.text and "released: opens free" in labels["fig3"]
        assert re.search(r"· ε [0-9.]+$", labels["fig4"]), labels["fig4"]   # shared
        inputs._plans.clear()
        m.setattr(plan_store, "code_fingerprint", lambda: "another planning code")
        again = preset(client, "fig3", **COLLAB)
        labels = {o["value"]: o["label"] for o in again.prop(ids.EX_PRESET, "options")}
        assert labels["fig4"].endswith("· price shown when chosen"), labels["fig4"]
    shown = preview(client, ids.EX_VIEW, **COLLAB, view="histogram", group="none")
    labels = {o["value"]: o["label"] for o in shown.prop(ids.EX_PRESET, "options")}
    assert re.search(r"· ε [0-9.]+$", labels["fig4"]), labels["fig4"]   # shared plan read
    # controls now differ from the preset: the control clears
    moved = preview(client, ids.EX_GROUP, **COLLAB, view="mean", group="none",
                    preset="fig3")
    assert moved.prop(ids.EX_PRESET, "value") is None
    still = preview(client, ids.EX_ROLE, **COLLAB, view="mean", group="PIRADS score",
                    preset="fig3")
    assert still.prop(ids.EX_PRESET, "value") == "fig3"
    # re-selecting re-applies it (free: already released)
    again = preset(client, "fig3", **COLLAB, view="histogram")
    assert again.prop(ids.EX_VIEW, "value") == "mean" and again.figures()
    assert _spent(collaborator)[0] == pytest.approx(spent)


def test_a_preset_that_cannot_render_in_paper_mode_says_so(client):
    reply = preset(client, "fig5", mechanism="paper", compare=True)
    assert reply.figures(), reply.message
    assert "paper mode cannot draw" in reply.message
    assert "compare mode was switched off" in reply.message
    assert reply.prop(ids.EX_MECHANISM, "value") == "sound"
    assert reply.prop(ids.EX_COMPARE, "value") is False
    assert reply.prop(ids.EX_ROLE, "value") == "third_party"


def test_a_dataset_switch_or_refusal_clears_the_old_figure(collaborator, client):
    shown = render(client, **COLLAB, view="mean")
    assert shown.figures()
    gone = post(client, ids.EX_DATASET, **COLLAB, dataset="no-such-dataset", view="mean")
    assert gone.figures() == [] and "There is no dataset" in gone.message
    bad = preview(client, ids.EX_X, **COLLAB, view="mean", x="Anonym_ID")
    assert bad.figures() == [] and bad.prop(ids.EX_PANEL) is None


def test_the_cap_refuses_a_non_owner_with_a_clear_message_and_nothing_charged(tmp_path):
    from app import create_app
    from tests.app.conftest import SessionAs

    app = create_app({"data_dir": tmp_path, "budgets": {"dataset_cap": 6.0}}, seed=3)
    services = _services(app)
    services.identity = SessionAs(Role.COLLABORATOR)
    client = app.server.test_client()
    views = [("histogram", "PIRADS score"), ("histogram", "none"), ("mean", "PIRADS score"),
             ("variance", "Prostatitis"), ("median", "Prostatitis"), ("mean", "Prostatitis")]
    refused = None
    for view, group in views:
        shown = preview(client, ids.EX_VIEW, **COLLAB, view=view, group=group)
        before = services.ledger.status(role=Role.COLLABORATOR, dataset_id="pirads",
                                        user="test-collaborator")
        reply = render(client, **COLLAB, view=view, group=group)
        after = services.ledger.status(role=Role.COLLABORATOR, dataset_id="pirads",
                                       user="test-collaborator")
        if reply.figures():
            continue
        refused = (shown, reply, before, after)
        break
    assert refused, "a cap of 6 must refuse within six views"
    shown, reply, before, after = refused
    assert "cap on the total privacy loss" in reply.message
    assert "Nothing was charged" in reply.message
    assert after == before
    assert shown.prop(ids.EX_RELEASE, "disabled") is True
    # the preview said so first: in its note, or refusing to draw the view's inputs
    assert "cap" in json.dumps(shown.prop(ids.EX_RELEASE_NOTE)) + shown.message
    assert after.role.spent > 0 and after.dataset.loss <= 6.0 + 1e-9
    # the owner is never refused by the cap
    services.identity = SessionAs(Role.OWNER)
    assert render(client, view="variance", group="Prostatitis").figures()
