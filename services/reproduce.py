"""Reproduction scripts: a released figure's mechanism as a short Python script.

Each sound-mode release gets a script that re-runs the same mechanism with the same public
parameters — ε per group, the public bounds and bins or candidate grid of the schema, the most
rows per patient (k), the quantile levels and each group's grid — on any table with the
dataset's public schema (a CSV path argument), with the project's engine (``dp_engine``) and
its CSV reader. The script draws new noise: it repeats how a number was made, never the
number. It holds public metadata only: no true value, no realized noise, no raw noisy sum and
no row (``PUBLIC_PARAMS`` is the whole of what is read from the stored tier).
"""

from __future__ import annotations

import json
import math
import pprint
from dataclasses import dataclass
from typing import Any

from dp_engine.schema import Schema
from dp_engine.sound.release import Release
from services.identity.roles import Role
from services.ledger.records import StoredRelease
from services.views.queries import BOX_QS, ViewRequest
from services.views.report import query_words
from services.views.statistics import histogram_bins

SCRIPT_FORMAT = 1
PUBLIC_PARAMS = ("n_candidates", "method", "qs")
"""The only parameters taken from the stored tier (all chosen from public inputs: a box
plot's candidate grid per group, its method and levels); the rest comes from the answer
and the public schema."""
AGGREGATE_CANDIDATES = 1001   # the aggregates' grid every box plot coarsens (plans.py)
STATISTICS = {"histogram": "histogram", "mean": "mean", "variance": "variance",
              "median": "quantiles"}


@dataclass(frozen=True)
class Reproduction:
    """A release's reproduction script: its file name, its source and its parameters."""

    filename: str
    source: str
    parameters: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"format": SCRIPT_FORMAT, "language": "python", "filename": self.filename,
                "usage": f"python {self.filename} TABLE.csv [--seed N]",
                "parameters": self.parameters, "source": self.source}


def _metadata_matches(rel: StoredRelease, schema: Schema, x: str, group: str | None) -> bool:
    """True when the schema's columns are those the release was made with (same hash)."""
    try:
        stored = json.loads(rel.query_key.rsplit("|as=", 1)[0])
    except ValueError:
        return False
    req = ViewRequest(rel.dataset_id, str(stored.get("view")), x, group, "sound", Role.OWNER)
    return stored.get("metadata") == req.canonical(schema)["metadata"]


def _same_epsilons(tier: Release, group_eps: list[float | None]) -> bool:
    by_group = tier.params.get("epsilon_by_group")
    stored = by_group if by_group is not None else [float(tier.epsilon)] * len(group_eps)
    if len(stored) != len(group_eps):
        return False
    return all((a is None and b is None) or (a is not None and b is not None
                                             and math.isclose(float(a), float(b),
                                                              rel_tol=1e-12))
               for a, b in zip(stored, group_eps, strict=True))


def parameters(rel: StoredRelease, schema: Schema, tier: Release) -> dict[str, Any] | None:
    """The public parameters of a sound-mode release, or None when they cannot be stated
    (paper mode, an unknown view, a schema changed since, a tier that does not match)."""
    ans = rel.answer
    view, x, group = ans.get("view"), ans.get("x"), ans.get("group")
    if not rel.dp or ans.get("mechanism") != "sound" or view not in STATISTICS:
        return None
    if x not in schema or (group and group not in schema):
        return None
    if not _metadata_matches(rel, schema, x, group):
        return None
    group_eps = [None if e is None or not math.isfinite(float(e)) or float(e) <= 0
                 else float(e) for e in ans.get("group_epsilon") or []]
    if not group_eps or not _same_epsilons(tier, group_eps):
        return None
    n_hat = ans.get("group_n_estimate") or []
    params: dict[str, Any] = {
        "release_id": rel.id, "dataset": rel.dataset_id, "dataset_version": rel.dataset_version,
        "query": query_words(ans), "view": view, "statistic": STATISTICS[view], "x": x,
        "group": group, "groups": list(ans.get("groups", [])),
        "cells": list(ans.get("cells", [])), "mechanism": ans.get("mechanism_label"),
        "epsilon": float(ans.get("epsilon")), "epsilon_by_group": group_eps,
        "noise_tier": rel.tier, "contribution": int(ans.get("contribution", 1)),
        "patient_column": schema.patient_column,
        "n_estimate": [float(n) for n in n_hat] if n_hat and all(
            n is not None for n in n_hat) else None,
    }
    if params["contribution"] != schema.contribution_bound:
        return None
    spec = schema.column(x)
    if view == "histogram":
        bins, _labels = histogram_bins(spec)
        params["bins"] = ([float(b) for b in bins] if not isinstance(bins, list)
                          else list(bins))
        params["bin_kind"] = "categories" if isinstance(bins, list) else "edges"
    else:
        lower, upper = spec.bounds()
        params.update(lower=float(lower), upper=float(upper))
    if view == "median":
        taken = {k: tier.params[k] for k in PUBLIC_PARAMS if k in tier.params}
        params.update(aggregate_candidates=AGGREGATE_CANDIDATES,
                      n_candidates=taken.get("n_candidates"),
                      method=taken.get("method", "cdf"),
                      qs=[float(q) for q in taken.get("qs", BOX_QS)])
    return params


def _public_schema(schema: Schema, params: dict[str, Any]) -> dict[str, Any]:
    """The schema's public description of the columns the script reads."""
    names = [params["x"], params["group"], schema.patient_column]
    columns = [schema.column(n).to_dict() for n in dict.fromkeys(n for n in names if n)]
    return {"dataset": schema.dataset, "title": schema.title, "confirmed": True,
            "patient_column": schema.patient_column,
            "max_rows_per_patient": schema.max_rows_per_patient, "columns": columns}


_RELEASE_CALLS = {
    "histogram": """\
    bins = (np.asarray(RELEASE["bins"], dtype=float) if RELEASE["bin_kind"] == "edges"
            else list(RELEASE["bins"]))
    return sound.release_counts(agg, eps, rng=rng, bins=bins, group_keys=RELEASE["groups"],
                                n_estimate=RELEASE["n_estimate"])""",
    "mean": """\
    return sound.release_moments(agg, eps, rng=rng, statistic="mean",
                                 group_keys=RELEASE["groups"], n_estimate=RELEASE["n_estimate"])""",
    "variance": """\
    return sound.release_moments(agg, eps, rng=rng, statistic="variance",
                                 group_keys=RELEASE["groups"], n_estimate=RELEASE["n_estimate"])""",
    "median": """\
    return sound.release_quantiles(agg, eps, qs=RELEASE["qs"], rng=rng, method=RELEASE["method"],
                                   group_keys=RELEASE["groups"], n_estimate=RELEASE["n_estimate"],
                                   n_candidates=RELEASE["n_candidates"])""",
}
_QUERIES = {
    "histogram": 'AggregateQuery.histogram(schema, RELEASE["x"], RELEASE["group"])',
    "mean": 'AggregateQuery.moments(schema, RELEASE["x"], RELEASE["group"], squares=False)',
    "variance": 'AggregateQuery.moments(schema, RELEASE["x"], RELEASE["group"], squares=True)',
    "median": ('AggregateQuery.candidates(schema, RELEASE["x"], RELEASE["group"],\n'
               '                                       '
               'n_candidates=RELEASE["aggregate_candidates"])'),
}

_TEMPLATE = '''#!/usr/bin/env python3
"""Re-run release #{release_id} of the Private Cohort Explorer on a table of your own.

{what} of dataset '{dataset}' (version {version}).
Mechanism: {mechanism}; ε = {epsilon} (one ε per group, below; None: withheld).

    python {filename} TABLE.csv [--seed N] > release.json

TABLE.csv is any table with the public schema below (the same column names); it is read as
the explorer reads an upload. The script repeats the mechanism and its parameters, not the
numbers: it draws new noise (the released noise is never disclosed). It needs the Private
Cohort Explorer installed (`pip install .` in its repository) for its engine, dp_engine, and
its CSV reader. The expected errors it states use the public group sizes only.
Nothing here comes from the hospital's patients: only public metadata of the release.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from dp_engine import sound
from dp_engine.schema import Schema
from dp_engine.sound.release import jsonable
from services.data.csv_loader import load_csv
from services.data.sources.memory import PandasSource
from services.data.sources.query import AggregateQuery

RELEASE = {release}

SCHEMA = {schema}


def read(path: str):
    """The table typed by the public schema (missing codes, category lists, bounds)."""
    schema = Schema.from_dict(SCHEMA)
    frame, schema, _report = load_csv(Path(path).read_bytes(), filename=Path(path).name,
                                      schema=schema, max_bytes=1 << 40)
    return frame, schema


def aggregate(frame, schema):
    """The release's sufficient statistics, computed as the explorer computes them
    (at most k rows per patient when the schema names a patient column)."""
    query = {query}
    query = query.bounded(schema.patient_column, schema.contribution_bound)
    return PandasSource(frame).aggregate(query)


def release(agg, rng):
    """The same mechanism with the same ε per group (NaN: a withheld group, no draw)."""
    eps = [math.nan if e is None else e for e in RELEASE["epsilon_by_group"]]
{call}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", help="CSV file with the public schema's columns")
    parser.add_argument("--seed", type=int, default=None, help="seed of the new noise")
    args = parser.parse_args(argv)
    frame, schema = read(args.table)
    rel = release(aggregate(frame, schema), np.random.default_rng(args.seed))
    groups = list(rel.params["group_keys"])
    out = {{
        "reproduces_release": RELEASE["release_id"], "mechanism": rel.mechanism,
        "epsilon": rel.epsilon, "epsilon_by_group": rel.params["epsilon_by_group"],
        "groups": groups, "cells": RELEASE["cells"],
        "values": np.asarray(rel.value, dtype=float).reshape(len(groups), -1),
        "ci95_low": np.asarray(rel.ci_low, dtype=float).reshape(len(groups), -1),
        "ci95_high": np.asarray(rel.ci_high, dtype=float).reshape(len(groups), -1),
        "parameters": {{k: v for k, v in rel.params.items() if k in PUBLIC}},
    }}
    json.dump(jsonable(out), sys.stdout, indent=1)
    print()
    return 0


PUBLIC = ("contribution", "epsilon_by_group", "bins", "lower", "upper", "qs", "n_candidates",
          "method", "group_keys")

if __name__ == "__main__":
    sys.exit(main())
'''


def script(params: dict[str, Any], schema: Schema) -> Reproduction:
    """The script of a release's public ``params`` (``parameters``)."""
    view = params["view"]
    filename = f"reproduce_release_{int(params['release_id'])}.py"
    what = str(params["query"])
    what = what[:1].upper() + what[1:]
    source = _TEMPLATE.format(
        release_id=int(params["release_id"]), what=what, dataset=params["dataset"],
        version=params["dataset_version"], mechanism=params["mechanism"],
        epsilon=f"{params['epsilon']:.6g}", filename=filename,
        release=pprint.pformat(params, width=96, sort_dicts=False, compact=True),
        schema=pprint.pformat(_public_schema(schema, params), width=96, sort_dicts=False,
                              compact=True),
        query=_QUERIES[view], call=_RELEASE_CALLS[view])
    return Reproduction(filename, source, params)


def for_release(rel: StoredRelease, *, ledger, registry) -> Reproduction | None:
    """The reproduction script of a stored release, or None when it has none (paper mode,
    another kind of release, a dataset or schema changed since, a tier no longer stored)."""
    if not rel.dp or rel.answer.get("mechanism") != "sound":
        return None
    try:
        ds = registry.get(rel.dataset_id)
    except Exception:     # noqa: BLE001 - a dataset gone since: no script, the report stays
        return None
    tier = ledger.tier(rel.dataset_version, rel.query_key.rsplit("|as=", 1)[0], rel.tier)
    if tier is None:
        return None
    params = parameters(rel, ds.schema, tier)
    return None if params is None else script(params, ds.schema)
