"""A small ward cohort for partner-page tests: the sample's columns on 150 generated rows, plus
the clinic each patient was seen at (forty clinics of a few patients each).

At the third party's noise level a figure of such small groups is withheld whole (a sentence on
the page), one of a large group and rare ones is withheld in part, and the ungrouped age
histogram is drawn, with counts near 0 in its outer bins. Which views of small groups are
withheld depends on the noise of their public DP sizes: ``page_figures`` finds them from the
quotes (the app's seed is fixed, so it finds the same ones every run).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
WARD = "ward"
WARD_ROWS = 150
WARD_SEED = 5
CLINICS = tuple(f"Clinic {n + 1:02d}" for n in range(40))
WHOLE = (("mean", "Age", "Clinic"), ("median", "Age", "Clinic"),
         ("mean", "Gleason score", "Clinic"), ("median", "Age", "Therapy"),
         ("mean", "Age", "Therapy"), ("median", "Age", "Follow up"))
"""Views of small groups: the first the third party's tier withholds whole goes on the page."""
PART = (("median", "Age", "Prostatitis"), ("mean", "Age", "Prostatitis"),
        ("median", "Age", "Primary_TU_LocalRecurrence_or_Progress"),
        ("mean", "Age", "Primary_TU_LocalRecurrence_or_Progress"))
"""Views of a large group and rare ones: the first withheld in part goes on the page."""
DRAWN = ("histogram", "Age", None)
"""The paper's Fig. 5: drawn (every age bin of the whole ward)."""
COHORT = {"period": "MRI reports of 2017 and 2018",
          "inclusion": "Men referred for a prostate MRI\nAged 18 or over",
          "source": "Radiology information system of the synthetic ward"}


def generator():
    """``sample_data/generate.py`` as a module."""
    sys.path.insert(0, str(ROOT / "sample_data"))
    try:
        import generate
    finally:
        sys.path.pop(0)
    return generate


def write_table(path: Path, *, seed: int, rows: int) -> Path:
    """A generated cohort table (the sample's columns) at ``path``."""
    generator().write_csv(path, seed, rows)
    return path


def ward_dataset(folder: Path) -> Path:
    """The ward's CSV (with its Clinic column) and its schema sidecar (dataset id ``ward``)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = list(csv.reader(io.StringIO(generator().to_csv_bytes(
        generator().generate(WARD_SEED, WARD_ROWS)).decode("utf-8"))))
    clinic = np.random.default_rng(WARD_SEED).choice(len(CLINICS), size=len(rows) - 1)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([*rows[0], "Clinic"])
    writer.writerows([*row, CLINICS[c]] for row, c in zip(rows[1:], clinic, strict=True))
    path = folder / f"{WARD}.csv"
    path.write_text(out.getvalue(), encoding="utf-8")
    schema = json.loads((ROOT / "sample_data" / "pirads_cohort.schema.json").read_text())
    schema.update(dataset=WARD, title="Ward cohort (synthetic, small)")
    schema["columns"].append({
        "name": "Clinic", "kind": "categorical", "role": "quasi_identifier",
        "label": "Clinic", "unit": "", "lower": None, "upper": None, "bin_width": None,
        "categories": list(CLINICS), "derived_from_data": False,
        "description": "The clinic the patient was seen at."})
    (folder / f"{WARD}.schema.json").write_text(json.dumps(schema), encoding="utf-8")
    return path


def _draft(services, figures, title: str = "Ward review"):
    from services.ledger import db as ledger_db
    from services.publish.service import Draft, parse_audience

    return Draft(title, WARD, parse_audience("third_party"),
                 ledger_db.now().date() + timedelta(days=7), tuple(figures))


def _key(view: str, x: str, group: str | None) -> str:
    from services.publish.service import request_key

    return request_key({"dataset": WARD, "view": view, "x": x, "group": group})


def _first(services, owner, views, keep) -> tuple[str, str]:
    for view, x, group in views:
        key = _key(view, x, group)
        (quote,) = services.publish.quote(owner, _draft(services, [(key, "")])).figures
        if keep(quote):
            return key, quote.label
    raise AssertionError(f"no view of {views} fits the ward page at this noise")


def page_figures(services, owner) -> list[tuple[str, str]]:
    """(key, label) of the ward page: a view withheld whole at the third party's tier, one
    withheld in part and the age histogram (drawn), found from the quotes (which release
    nothing but the groupings' DP sizes, priced by the owner)."""
    return [_first(services, owner, WHOLE, lambda q: q.all_withheld),
            _first(services, owner, PART, lambda q: 0 < len(q.withheld) < q.groups),
            _first(services, owner, (DRAWN,), lambda q: not q.withheld)]


def release_as_audience(services, key: str) -> None:
    """A view released by a third party (so that it is listed on the Publish page)."""
    import json

    from services.identity.roles import Role
    from services.identity.session import Identity
    from services.views.queries import parse_request

    ds = services.registry.get(WARD)
    req = parse_request({**json.loads(key), "mechanism": "sound", "role": "third_party"},
                        Role.THIRD_PARTY, ds.schema)
    services.releases.answer(Identity("tina", Role.THIRD_PARTY, True), req, dataset=ds,
                             price=True)


def publish_ward(services, owner, *, title: str = "Ward review") -> str:
    """Describe the ward's cohort and publish ``page_figures`` to third parties (service
    calls, as the Publish page makes them); returns the page's slug."""
    services.publish.save_cohort(owner, WARD, **COHORT)
    draft = _draft(services, page_figures(services, owner), title)
    quote = services.publish.quote(owner, draft)
    return services.publish.publish(owner, draft, confirmed_cost=quote.total).slug
