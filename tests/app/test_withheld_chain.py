"""A view whose owner tier withheld every group can still be asked by a partner (issue 23).

On the small ward cohort (forty clinics of a few patients) the owner's mean Gleason score by
clinic withholds every clinic; a partner's copy of it, as a published page asks it, used to
fail with "Nothing stored to draw this tier from". It is an empty answer, charged nothing.
"""

from __future__ import annotations

from services.identity.roles import Role
from services.identity.session import Identity
from services.views.queries import parse_request
from tests.app.partner_support import ward_dataset

KEY = {"dataset": "ward", "view": "mean", "x": "Gleason score", "group": "Clinic",
       "mechanism": "sound"}


def test_a_partner_asks_a_view_whose_owner_tier_withheld_everything(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path / "var",
                      "dataset_paths": [ward_dataset(tmp_path / "data")]}, seed=7)
    services = services_of(app)
    ds = services.registry.get("ward")
    owner = Identity("olga", Role.OWNER, True)
    mine = services.releases.answer(
        owner, parse_request({**KEY, "role": "owner"}, Role.OWNER, ds.schema), dataset=ds,
        price=True)
    assert all(mine.withheld)
    partner = parse_request({**KEY, "role": "third_party"}, Role.THIRD_PARTY, ds.schema)
    before = services.ledger.budget(role=Role.THIRD_PARTY, dataset_id="ward").spent
    ((answer, _, _),) = services.releases.answer_all(owner, [partner], dataset=ds,
                                                     channel="publish", price=True)
    assert answer.withheld and all(answer.withheld)
    assert all(v is None or v != v for row in answer.values for v in row)   # no number
    assert services.ledger.budget(role=Role.THIRD_PARTY, dataset_id="ward").spent == before
