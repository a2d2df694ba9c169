"""The partner page over HTTP and through its service (issue 23): the cohort description the
owner writes once per dataset, the publish quote's plain words, the page's CSV, its title,
the methods note and the notes on withheld figures and small counts."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace
from datetime import timedelta

import pytest

from layouts import ids
from layouts.components.figures import fmt
from layouts.publish.view import published_figure, table_model
from services.csv_safe import is_safe
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger import db as ledger_db
from services.publish import methods
from services.publish.cohort import LIMITS, CohortError, checked
from services.publish.export import PAGE_CSV_HEADER
from services.publish.service import Draft, FigureQuote, PageQuote, PublishError, parse_audience
from tests.app.conftest import SessionAs
from tests.app.partner_support import (
    COHORT,
    WARD,
    page_figures,
    publish_ward,
    ward_dataset,
)

UPDATE = "/_dash-update-component"
OWNER = Identity("olga", Role.OWNER, True)
TINA = Identity("tina", Role.THIRD_PARTY, True)
WITHHELD = "too few patients to show at this noise level"


@pytest.fixture
def ward_app(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path / "var",
                      "dataset_paths": [ward_dataset(tmp_path / "data")]}, seed=7)
    services_of(app).identity = SessionAs(Role.OWNER, "olga")
    return app


@pytest.fixture
def services(ward_app):
    from app import services_of

    return services_of(ward_app)


@pytest.fixture
def client(ward_app):
    return ward_app.server.test_client()


def _call(client, trigger: tuple[str, str], values: dict, output: str) -> dict:
    """POST the callback writing ``output`` fired by ``trigger`` (id, property)."""
    deps = client.get("/_dash-dependencies").json
    dep = next(d for d in deps if f"{output}." in d["output"] and any(
        i["id"] == trigger[0] and i["property"] == trigger[1] for i in d["inputs"]))
    outputs = [{"id": o.rsplit(".", 1)[0], "property": o.rsplit(".", 1)[1]}
               for o in dep["output"].strip(".").split("...")]
    key = lambda i: (i["id"], i["property"])   # noqa: E731
    body = {"output": dep["output"], "outputs": outputs if len(outputs) > 1 else outputs[0],
            "inputs": [{**i, "value": values.get(key(i))} for i in dep["inputs"]],
            "state": [{**s, "value": values.get(key(s))} for s in dep["state"]],
            "changedPropIds": [f"{trigger[0]}.{trigger[1]}"]}
    for s in body["state"]:
        if str(s["id"]).startswith("{"):
            s["value"] = []
    resp = client.post(UPDATE, json=body)
    assert resp.status_code == 200, resp.data
    return resp.json["response"]


# ---- the cohort description -------------------------------------------------------------------

def test_cohort_description_is_plain_text_in_words_never_a_pasted_table():
    got = checked(WARD, "  2017 –\n 2018 ", "Men referred for MRI\n\n  aged 18+ ", " RIS ")
    assert (got.period, got.inclusion, got.source) == ("2017 – 2018",
                                                         "Men referred for MRI\naged 18+", "RIS")
    assert checked(WARD, None, None, None).empty
    table = "\n".join(f"{i},70.4,2017,5,yes" for i in range(3))
    bad = [("x" * (LIMITS["period"] + 1), "", "", "Period: at most"),
           ("", "ok\x00", "", "control characters"),
           ("", table, "", "reads like rows of a table"),
           ("", "\n".join("line" for _ in range(20)), "", "at most 12 lines"),
           ("", "", ["not", "text"], "plain text")]
    for period, inclusion, source, words in bad:
        with pytest.raises(CohortError, match=words):
            checked(WARD, period, inclusion, source)


def test_the_owner_writes_the_description_once_and_only_the_owner(client, services):
    form = {(ids.PUB_DATASET, "value"): WARD, (ids.PUB_COHORT_PERIOD, "value"): COHORT["period"],
            (ids.PUB_COHORT_INCLUSION, "value"): COHORT["inclusion"],
            (ids.PUB_COHORT_SOURCE, "value"): COHORT["source"],
            (ids.PUB_COHORT_SAVE, "n_clicks"): 1}
    services.identity.set(Role.THIRD_PARTY, "tina")
    refused = _call(client, (ids.PUB_COHORT_SAVE, "n_clicks"), form, ids.PUB_COHORT_MESSAGE)
    assert "Only the data owner" in json.dumps(refused)
    loaded = _call(client, (ids.PUB_DATASET, "value"), form, ids.PUB_COHORT_PERIOD)
    assert COHORT["period"] not in json.dumps(loaded)
    with pytest.raises(PublishError):
        services.publish.save_cohort(TINA, WARD, "a", "b", "c")
    assert services.publish.store.cohort(WARD).empty          # nothing was stored

    services.identity.set(Role.OWNER, "olga")
    saved = _call(client, (ids.PUB_COHORT_SAVE, "n_clicks"), form, ids.PUB_COHORT_MESSAGE)
    assert "Saved" in json.dumps(saved)
    loaded = _call(client, (ids.PUB_DATASET, "value"), form, ids.PUB_COHORT_PERIOD)
    values = [loaded[f][p] for f, p in ((ids.PUB_COHORT_PERIOD, "value"),
                                        (ids.PUB_COHORT_INCLUSION, "value"),
                                        (ids.PUB_COHORT_SOURCE, "value"))]
    assert values == [COHORT["period"], COHORT["inclusion"], COHORT["source"]]
    pasted = _call(client, (ids.PUB_COHORT_SAVE, "n_clicks"), {
        **form, (ids.PUB_COHORT_INCLUSION, "value"): "1,2,3,4\n5,6,7,8\n9,1,2,3"},
        ids.PUB_COHORT_MESSAGE)
    assert "rows of a table" in json.dumps(pasted)
    assert services.publish.store.cohort(WARD).inclusion == COHORT["inclusion"]   # kept
    other = _call(client, (ids.PUB_DATASET, "value"), {(ids.PUB_DATASET, "value"): "pirads"},
                  ids.PUB_COHORT_PERIOD)
    assert COHORT["period"] not in json.dumps(other)          # one description per dataset


# ---- the quote ---------------------------------------------------------------------------------

def _quote(costs, remaining, cached=()) -> PageQuote:
    figures = tuple(FigureQuote(f"figure {n}", c, n in cached, None)
                    for n, c in enumerate(costs))
    return PageQuote(figures, Role.THIRD_PARTY, WARD, "Ward", remaining, 4.0)


def test_how_many_figures_the_audience_cannot_afford():
    assert _quote([3.0, 1.0, 1.0], 2.0).unaffordable == 1      # the two small ones fit
    assert _quote([3.0, 1.0, 1.0], 0.5).unaffordable == 3
    assert _quote([3.0, 1.0, 1.0], 5.0).unaffordable == 0
    assert _quote([3.0, 1.0], None).unaffordable == 0           # no limit
    assert _quote([0.0, 3.0], 1.0, cached={1}).unaffordable == 0   # held already: free
    assert [q.cost for q in _quote([1.0, 3.0, 2.0], 1.0).most_expensive(2)] == [3.0, 2.0]


def _draft(services, dataset: str = WARD, figures=None) -> Draft:
    if figures is None:
        figures = [(c.key, c.label) for c in services.publish.candidates(OWNER, dataset)]
    return Draft("Ward review", dataset, parse_audience("third_party"),
                 ledger_db.now().date() + timedelta(days=7), tuple(figures))


def _quote_form(services, dataset: str, keys=None) -> dict:
    if keys is None:
        keys = [c.key for c in services.publish.candidates(OWNER, dataset)]
    return {(ids.PUB_DATASET, "value"): dataset, (ids.PUB_TITLE, "value"): "Ward review",
            (ids.PUB_AUDIENCE, "value"): "third_party",
            (ids.PUB_EXPIRES, "value"): (ledger_db.now() + timedelta(days=7)).date().isoformat(),
            (ids.PUB_FIGURES, "value"): list(keys), (ids.PUB_QUOTE, "n_clicks"): 1}


def test_the_quote_says_what_the_audience_can_afford_and_what_to_do(client, services):
    quote = services.publish.quote(OWNER, _draft(services, "pirads"))
    assert quote.total > 0 and quote.remaining is not None and quote.affordable
    out = _call(client, (ids.PUB_QUOTE, "n_clicks"), _quote_form(services, "pirads"),
                ids.PUB_QUOTE_OUT)
    text = json.dumps(out, ensure_ascii=False)
    assert "can afford it" in text and "Press Publish" in text
    assert out[ids.PUB_CONFIRM]["disabled"] is False

    cheapest = min(q.cost for q in quote.figures if q.cost > 0)
    services.ledger.set_policy(dataset_id="pirads", key="budget:third_party",
                               value=cheapest * 1.5, user="olga")
    tight = services.publish.quote(OWNER, _draft(services, "pirads"))
    assert 0 < tight.unaffordable < len(tight.figures)
    out = _call(client, (ids.PUB_QUOTE, "n_clicks"), _quote_form(services, "pirads"),
                ids.PUB_QUOTE_OUT)
    text = json.dumps(out, ensure_ascii=False)
    n = len(tight.figures)
    assert f"This audience cannot afford {tight.unaffordable} of these {n} figures" in text
    assert "budget controls on the " in text and '"href": "/ledger"' in text
    assert "Press Publish" not in text and "Publish stays off" in text
    assert out[ids.PUB_CONFIRM]["disabled"] is True
    with pytest.raises(PublishError, match="Nothing was released"):
        services.publish.publish(OWNER, _draft(services, "pirads"),
                                 confirmed_cost=tight.total)


def test_a_page_is_released_all_or_nothing_when_the_door_refuses_its_last_figure(services):
    """The audience can afford every figure but the last: the door refuses the page as one,
    so nothing is charged, nothing is stored and no page exists; the first figures alone
    then publish (so it was the last one the budget could not hold)."""
    cands = services.publish.candidates(OWNER, "pirads")[:3]
    figures = [(c.key, c.label) for c in cands]
    quote = services.publish.quote(OWNER, _draft(services, "pirads", figures))
    costs = [q.cost for q in quote.figures]
    assert len(costs) == 3 and all(c > 0 for c in costs)
    led = services.ledger
    spent = led.budget(role=Role.THIRD_PARTY, dataset_id="pirads").spent
    led.set_policy(dataset_id="pirads", key="budget:third_party",
                   value=spent + costs[0] + costs[1] + costs[2] / 2, user="olga")

    def books():
        return ([(b.role, b.spent) for b in led.budgets()], led.dataset_loss("pirads"),
                led.count_releases(), len(led.internal_releases()), len(led.deliveries()))

    before = books()
    with pytest.raises(PublishError, match="Nothing was released and no page was stored"):
        services.publish.publish(OWNER, _draft(services, "pirads", figures),
                                 confirmed_cost=quote.total)
    assert books() == before and services.publish.store.list() == []
    page = services.publish.publish(OWNER, _draft(services, "pirads", figures[:2]),
                                    confirmed_cost=costs[0] + costs[1])
    assert len(page.figures) == 2
    assert led.budget(role=Role.THIRD_PARTY, dataset_id="pirads").spent == pytest.approx(
        spent + costs[0] + costs[1])


def test_the_quote_names_figures_that_would_be_withheld_whole(services, client):
    figures = page_figures(services, OWNER)
    quote = services.publish.quote(OWNER, _draft(services, figures=figures))
    whole, part, drawn = quote.figures
    assert whole.all_withheld and whole.cost == 0
    assert 0 < len(part.withheld) < part.groups and not drawn.withheld
    out = _call(client, (ids.PUB_QUOTE, "n_clicks"),
                _quote_form(services, WARD, [k for k, _ in figures]), ids.PUB_QUOTE_OUT)
    text = json.dumps(out, ensure_ascii=False)
    assert text.count("every group withheld at this tier") == 1
    assert f"withheld at this tier (too few patients): {', '.join(part.withheld)}" in text


# ---- the published page: header, sentences, notes, CSV, title ----------------------------------

def _open(client, path: str):
    deps = client.get("/_dash-dependencies").json
    dep = next(d for d in deps if f"{ids.PAGE_CONTENT}." in d["output"])
    body = {"output": dep["output"],
            "outputs": [{"id": o.rsplit(".", 1)[0], "property": o.rsplit(".", 1)[1]}
                        for o in dep["output"].strip(".").split("...")],
            "inputs": [{**i, "value": path if i["property"] == "pathname" else None}
                       for i in dep["inputs"]],
            "state": [], "changedPropIds": [f"{ids.PAGE_LOCATION}.pathname"]}
    resp = client.post(UPDATE, json=body)
    assert resp.status_code == 200
    return resp.json["response"]


def _text(tree) -> str:
    return json.dumps(tree, ensure_ascii=False)


def test_a_third_party_reads_the_header_the_methods_note_and_withheld_sentences(client,
                                                                                 services):
    slug = publish_ward(services, OWNER)
    services.identity.set(Role.THIRD_PARTY, "tina")
    response = _open(client, f"/views/{slug}")
    text = _text(response)
    opened = services.publish.open(TINA, slug)
    assert opened.n_hat is not None and opened.n_hat > 0
    for words in (COHORT["period"], COHORT["source"], "Aged 18 or over",
                  f"about {opened.n_hat:,}", "What ε means", "What the 95 % intervals mean",
                  "How the noise was added", "not a percentage of the value itself",
                  "Withheld groups", "Not shown: all 40 groups of Clinic (Clinic 01, Clinic 02, "
                  "Clinic 03 … Clinic 40) have", WITHHELD):
        assert words in text, words
    assert text.count("Not shown:") == 1
    assert text.count('"type": "Graph"') == 2                 # no empty chart
    assert "does not prove that such records exist" in text   # the age histogram's small cells
    title = json.dumps(response, ensure_ascii=False).split('"title": ')[-1]
    assert title.startswith('"Ward review · Private Cohort Explorer"')
    demo = _text(_open(client, f"/views/{slug}/demo"))
    assert "About these figures" in demo and demo.count("Not shown:") == 1
    routed = json.dumps(_open(client, f"/views/{slug}/demo"), ensure_ascii=False)
    assert routed.split('"title": ')[-1].startswith('"Ward review (demo) · Private Cohort')

    html = client.get(f"/views/{slug}/export.html").get_data(as_text=True)
    assert COHORT["period"] in html and "How to read these numbers" in html
    assert html.count("class='withheld'") == 1


def test_titles_never_tell_an_outsider_the_page_exists(client, services):
    slug = publish_ward(services, OWNER, title="Secret trial review")
    for role, user in ((Role.COLLABORATOR, "carl"), (Role.THIRD_PARTY, "tina")):
        services.identity.set(role, user)
        first = client.get(f"/views/{slug}").get_data(as_text=True)
        title = re.search(r"<title>(.*?)</title>", first).group(1)
        routed = json.dumps(_open(client, f"/views/{slug}"))
        if role is Role.THIRD_PARTY:
            assert title == "Secret trial review · Private Cohort Explorer"
        else:
            assert title == "Published page · Private Cohort Explorer"
            assert "Secret trial" not in routed
    unknown = client.get("/views/no-such-page-1234").get_data(as_text=True)
    assert "<title>Published page · Private Cohort Explorer</title>" in unknown


def test_the_page_csv_holds_every_figure_escaped(client, services):
    draft = _draft(services, figures=page_figures(services, OWNER))
    evil = '=HYPERLINK("http://example.invalid","x")'
    draft = replace(draft, figures=((draft.figures[0][0], evil), *draft.figures[1:]))
    services.publish.save_cohort(OWNER, WARD, **COHORT)
    quote = services.publish.quote(OWNER, draft)
    slug = services.publish.publish(OWNER, draft, confirmed_cost=quote.total).slug
    services.identity.set(Role.THIRD_PARTY, "tina")
    before = len(services.ledger.deliveries())
    resp = client.get(f"/views/{slug}/page.csv")
    assert resp.status_code == 200 and resp.mimetype == "text/csv"
    assert "attachment" in resp.headers["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(resp.get_data(as_text=True))))
    assert rows[0] == PAGE_CSV_HEADER
    assert all(is_safe(cell) for row in rows for cell in row)
    assert rows[1][2] == "'" + evil
    opened = services.publish.open(TINA, slug)
    expected = sum(len(f.answer.groups) * len(f.answer.cells) for f in opened.figures)
    assert len(rows) - 1 == expected
    assert len(services.ledger.deliveries()) - before == 2 * len(opened.figures)  # csv + open
    col = {name: n for n, name in enumerate(PAGE_CSV_HEADER)}
    for n, fig in enumerate(opened.figures, start=1):
        mine = [r for r in rows[1:] if r[col["figure"]] == str(n)]
        a = fig.answer
        assert {r[col["mechanism"]] for r in mine} == {a.mechanism_label}
        assert all(float(r[col["figure_epsilon"]]) == pytest.approx(a.epsilon) for r in mine)
        for r in mine:
            g = a.groups.index(r[col["group"]])
            c = a.cells.index(r[col["cell"]])
            if a.withheld[g]:
                assert r[col["withheld"]] == WITHHELD and r[col["value"]] == ""
            else:
                assert float(r[col["value"]]) == pytest.approx(a.values[g][c])
                assert float(r[col["ci95_low"]]) == pytest.approx(a.ci_low[g][c])
                assert float(r[col["group_epsilon"]]) == pytest.approx(a.group_epsilon[g])
    services.identity.set(Role.COLLABORATOR, "carl")
    assert client.get(f"/views/{slug}/page.csv").status_code == 404


# ---- the words, from the answers -----------------------------------------------------------------

def test_methods_note_and_notes_follow_the_answers(services):
    slug = publish_ward(services, OWNER)
    answers = [f.answer for f in services.publish.open(TINA, slug).figures]
    whole, box, hist = answers
    assert methods.all_withheld(whole) and methods.withheld_sentence(whole)
    assert methods.withheld_sentence(box) is None and methods.withheld_sentence(hist) is None
    partly = methods.partly_withheld_sentence(box)
    assert partly and all(g in partly for g in methods.withheld_groups(box))
    note = {p.heading: p.text for p in methods.methods_note(answers, total_epsilon=1.5,
                                                              budget_role="third party")}
    assert "ε 1.5" in note["What ε means"] and "third party budget" in note["What ε means"]
    for a in (box, hist):
        assert a.mechanism_label in note["How the noise was added"]
    if whole.view not in {box.view, hist.view}:                # withheld whole: not described
        assert whole.mechanism_label not in note["How the noise was added"]
    assert "90 % range" in note["How precise"] and "10–20 %" in note["How precise"]
    assert "Each row of the hospital's table" in note["Who is protected"]

    small = methods.small_counts_note(hist)
    near = [(g, c) for g in range(len(hist.groups)) for c in range(len(hist.cells))
            if hist.ci_low[g][c] <= 0]
    assert small and f"in {len(near)} of {len(hist.cells)} cells" in small
    lifted = replace(hist, ci_low=[[max(v, 1.0) for v in row] for row in hist.ci_low])
    assert methods.small_counts_note(lifted) is None            # no interval reaches 0
    assert methods.small_counts_note(box) is None               # not counts
    shown = replace(box, withheld=[False] * len(box.groups))
    assert "Withheld groups" not in {p.heading for p in methods.methods_note(
        [shown, hist], total_epsilon=1.0, budget_role="third party")}


def test_a_published_figure_has_no_chart_title_or_caption_to_clip(services):
    slug = publish_ward(services, OWNER)
    opened = services.publish.open(TINA, slug)
    box = opened.figures[1]
    fig = published_figure(box.answer)
    assert fig["layout"]["title"] == {"text": ""}
    assert "height" not in fig["layout"]          # sized by the page, not fixed
    texts = [a["text"] for a in fig["layout"]["annotations"]]
    assert texts and set(texts) == {"withheld"}                # one word in each gap
    header, rows = table_model(box)
    assert [r[0] for r in rows][:3] == ["5th percentile", "25th percentile", "Median"]
    gone = ["withheld" if w else fmt(e) for w, e in zip(box.answer.withheld,
                                                       box.answer.group_epsilon, strict=True)]
    assert rows[-1] == ["ε of the group", *gone] and "withheld" in gone
