"""A stored release's chart is drawn once per app and sent again as the same JSON."""

from __future__ import annotations

import json

from dash import html
from plotly.io.json import to_json_plotly

from layouts.explore.rendered import RenderCache, plain


def test_plain_is_the_json_dash_sends():
    div = html.Div([html.Span("a", id="s"), html.Table(html.Tr(html.Td(1.5)))], id="d")
    assert plain(div) == json.loads(to_json_plotly(div))
    assert to_json_plotly(plain(div)) == to_json_plotly(div)


def test_drawn_once_per_key_and_bounded():
    cache, draws = RenderCache(size=2), []

    def draw(name):
        return lambda: draws.append(name) or html.Div(name)

    first = cache.get("a", draw("a"))
    assert cache.get("a", draw("a")) is first and draws == ["a"]
    cache.get("b", draw("b"))
    cache.get("c", draw("c"))                     # evicts "a", the least recently used
    assert len(cache) == 2
    cache.get("a", draw("a"))
    assert draws == ["a", "b", "c", "a"]


def test_two_apps_in_one_process_never_share_a_drawing(tmp_path):
    from app import create_app
    from layouts import ids
    from tests.app.explore_client import post, render

    figures = {}
    for name, view in (("one", "mean"), ("two", "histogram")):
        app = create_app({"data_dir": tmp_path / name})
        client = app.server.test_client()
        values = {"dataset": "pirads", "role": "owner", "view": view, "x": "Age",
                  "group": "PIRADS score"}
        first = render(client, **values)
        # the same release id in both ledgers (#1: the grouping's sizes, priced first)
        assert first.release_ids() == ["2"]
        again = post(client, ids.EX_RELEASE, **values)
        assert "Opened free" in again.text and again.figures() == first.figures()
        figures[name] = again.figures()
    assert figures["one"] != figures["two"]
