"""The ledger page reads: queries in words, ε in the row, the dataset cap with its 80 % warning
(issue 11 item 5)."""

from __future__ import annotations

import json

from callbacks import ledger as ledger_cb
from services.identity.roles import Role
from tests.app.conftest import SessionAs
from tests.app.explore_client import render


def _text(component) -> str:
    return json.dumps(component.to_plotly_json(), default=lambda o: o.to_plotly_json(),
                      ensure_ascii=False)


def test_rows_name_the_query_in_words_with_their_epsilon(explore_app, client, session):
    from app import services_of

    session.set(Role.COLLABORATOR)
    render(client, role="collaborator", view="mean", group="PIRADS score")
    session.set(Role.OWNER)
    services = services_of(explore_app)
    page = _text(ledger_cb.page_view(services, session.current()))
    rel, sizes = services.ledger.releases()                   # newest first
    assert sizes.query_key.startswith("internal:sizes:PIRADS score")   # priced first
    assert "mean of Age by PI-RADS score" in page
    assert f"{rel.epsilon:.4g}" in page and "Collaborator" in page
    assert '"query_key"' not in page and "answer_json" not in page    # no raw JSON rows


def test_the_ledger_page_warns_from_80_percent_of_the_dataset_cap(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path,
                      "budgets": {"dataset_cap": 2.0, "collaborator": 100}}, seed=2)
    services = services_of(app)
    services.identity = SessionAs(Role.COLLABORATOR)
    client = app.server.test_client()
    render(client, role="collaborator", view="mean", group="none")
    owner = SessionAs(Role.OWNER).current()
    below = _text(ledger_cb.page_view(services, owner))
    loss = services.ledger.dataset_loss("pirads")
    assert loss < 0.8 * 2 and "of its privacy-loss cap" not in below
    for x in ("Number_of_Lesions", "Gleason score", "Year", "PIRADS score"):
        for view in ("mean", "variance", "histogram"):   # disclosures to a collaborator
            render(client, role="collaborator", view=view, x=x, group="none")
            loss = services.ledger.dataset_loss("pirads")
            if loss >= 0.8 * 2:
                break
        if loss >= 0.8 * 2:
            break
    assert loss >= 0.8 * 2
    page = _text(ledger_cb.page_view(services, owner))
    assert f"has used {loss / 2 * 100:.0f} % of its privacy-loss cap" in page
    assert "refused for everyone but the data owner" in page
