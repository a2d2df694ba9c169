"""Accessibility without a browser: the page's language, titles and icon over HTTP; every
control labelled and every chart followed by its data table, in every page's layout."""

from __future__ import annotations

import base64
import re

import dash_bootstrap_components as dbc
import numpy as np
import plotly.graph_objects as go
import pytest
from dash import dcc, html

from callbacks.shell import page_for, page_titles
from layouts.components import accessible, shell
from layouts.login.page import login_page
from layouts.studio.page import dom_id
from services.identity.roles import Role
from services.identity.users import add_user

PASSWORD = "a long enough password"
LABELLED = (dcc.Dropdown, dcc.Input, dcc.Upload, dcc.RadioItems, dcc.Checklist)


def _title(body: str) -> str:
    match = re.search(r"<title>(.*?)</title>", body, re.S)
    assert match, body[:300]
    return match.group(1)


def test_every_route_is_english_with_its_own_title(client):
    titles = {}
    for path in page_titles():
        body = client.get(path, headers={"Accept": "text/html"}).get_data(as_text=True)
        assert '<html lang="en">' in body
        assert '<link rel="icon" type="image/svg+xml" href="/favicon.svg">' in body
        titles[path] = _title(body)
    assert titles == page_titles()
    assert len(set(titles.values())) == len(page_titles())
    assert all(t.endswith(shell.PRODUCT) for t in titles.values())


def test_in_page_navigation_sets_the_same_titles(explore_app):
    """Dash Pages sets the document title after in-page navigation from its registry: the
    registry carries exactly the server's titles."""
    import dash

    registered = {p["path"]: p["title"] for p in dash.page_registry.values()}
    for path, title in page_titles().items():
        assert registered[path] == title


@pytest.fixture
def users_client(tmp_path):
    from app import create_app

    users = tmp_path / "users.json"
    add_user(users, "olga", "owner", PASSWORD)
    app = create_app({"data_dir": tmp_path / "var", "users_file": users,
                      "secret_key": "a11y-secret-" + "x" * 32}, seed=1)
    return app.server.test_client()


def test_favicon_is_served_without_login(users_client):
    closed = users_client.get("/_dash-layout")
    assert closed.status_code == 401  # the guard is on
    for path in ("/favicon.svg", "/favicon.ico"):
        icon = users_client.get(path)
        assert icon.status_code == 200, path
        assert icon.mimetype == "image/svg+xml"
        assert icon.data.startswith(b"<svg") and b"#0b5394" in icon.data
    sign_in = users_client.get("/login").get_data(as_text=True)
    assert 'href="/favicon.svg"' in sign_in and '<html lang="en">' in sign_in
    assert "Sign in" in _title(login_page(csrf="x", next_url="/"))


def _walk(node, hidden: bool = False):
    """(component, parent children list, index, under a hidden ancestor) for the tree."""
    children = getattr(node, "children", None)
    hidden = hidden or bool(getattr(node, "hidden", False))
    items = children if isinstance(children, list | tuple) else [children]
    for i, child in enumerate(items):
        if hasattr(child, "to_plotly_json"):
            yield child, items, i, hidden
            yield from _walk(child, hidden)


def _owner_pages(services) -> dict[str, object]:
    from tests.app.conftest import SessionAs

    owner = SessionAs(Role.OWNER).current()
    pages = {path: page_for(services, owner, path) for path in page_titles()}
    return {"shell": shell.layout(), **pages}


def _labels(tree) -> tuple[set[str], set[str]]:
    """Ids named by a <label for>, and ids of controls inside a fieldset with a legend."""
    label_for, grouped = set(), set()
    for node, _, _, _ in _walk(tree):
        if isinstance(node, html.Label) and getattr(node, "htmlFor", None):
            label_for.add(node.htmlFor)
        if isinstance(node, html.Fieldset):
            kids = node.children if isinstance(node.children, list) else [node.children]
            if any(isinstance(k, html.Legend) for k in kids):
                grouped |= {getattr(k, "id", None) for k in kids}
    return label_for, grouped


def test_every_control_in_every_page_has_a_label(explore_app):
    from app import services_of

    for name, tree in _owner_pages(services_of(explore_app)).items():
        label_for, grouped = _labels(tree)
        controls = [n for n, _, _, hidden in _walk(tree) if not hidden
                    and (isinstance(n, LABELLED) or type(n).__name__ in ("Input", "RadioItems"))
                    and getattr(n, "type", None) != "hidden"]
        assert controls or name == "shell", name
        unlabelled = [n.id for n in controls if dom_id(n.id) not in label_for | grouped]
        assert unlabelled == [], (name, unlabelled)


def test_every_graph_in_every_page_is_followed_by_its_data_table(explore_app):
    from app import services_of

    graphs = 0
    for name, tree in _owner_pages(services_of(explore_app)).items():
        for node, siblings, i, hidden in _walk(tree):
            if not isinstance(node, dcc.Graph) or hidden:
                continue
            graphs += 1
            after = siblings[i + 1] if i + 1 < len(siblings) else None
            assert isinstance(after, html.Details), (name, node.id)
            assert any(isinstance(t, html.Table) for t, _, _, _ in _walk(after)), (name, node.id)
    assert graphs >= 1  # the Anonymize scatter at least


def test_figure_table_lists_what_each_trace_draws():
    fig = go.Figure([
        go.Bar(name="Low", x=["A", "B"], y=np.array([3.5, 7.25]),
               error_y={"type": "data", "array": [0.5, 1.0]}),
        go.Box(name="Age", x=["A"], q1=[50], median=[61], q3=[70], lowerfence=[40],
               upperfence=[80]),
    ])
    fig.update_layout(title={"text": "Age by score"}, xaxis_title="Score", yaxis_title="Count")
    table = accessible.figure_table(fig)
    cells = [[str(c.children) for c in row.children]
             for row in table.children[2].children]
    assert table.children[0].children == "Age by score"
    header = [th.children for th in table.children[1].children.children]
    assert header == ["Series", "Score", "Count", "± error", "Lower whisker", "Lower quartile",
                      "Median", "Upper quartile", "Upper whisker"]
    blank = ["–"] * 5
    assert ["Low", "A", "3.5", "0.5", *blank] in cells
    assert ["Low", "B", "7.25", "1", *blank] in cells
    assert ["Age", "A", "–", "–", "40", "50", "61", "70", "80"] in cells


def test_figure_table_reads_plotly_typed_arrays_and_caps_long_scatters():
    ys = np.arange(accessible.MAX_TABLE_ROWS + 5, dtype="f8")
    browser_form = {"data": [{"type": "scatter", "name": "records",
                              "x": {"dtype": "f8", "bdata": base64.b64encode(ys).decode()},
                              "y": {"dtype": "f8", "bdata": base64.b64encode(ys * 2).decode()}}]}
    table = accessible.figure_table(browser_form, "Records")
    rows = table.children[2].children
    assert len(rows) == accessible.MAX_TABLE_ROWS
    assert [c.children for c in rows[3].children] == ["records", "3", "6"]
    assert f"of {len(ys)} points" in table.children[0].children
    for junk in (None, "x", {"data": "x"}, {"data": [{"x": 5, "error_y": 3}]}):
        assert "Nothing is plotted" in str(accessible.figure_table(junk))


def test_field_refuses_a_control_it_cannot_name():
    with pytest.raises(ValueError, match="string id"):
        accessible.field("Dataset", dcc.Dropdown(options=[]))
    group = accessible.field("Method", dbc.RadioItems(id="m", options=[]))
    assert isinstance(group, html.Fieldset) and group.children[0].id == "m--label"

