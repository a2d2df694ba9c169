"""Privacy audit of the synthetic copy's measurement step (everything MST reads the data for)
at the ε it is charged, on add/remove-one neighbours: D and D plus one patient, on a tiny
domain (three binary columns: the tree has two of three possible edges, so the selection is
audited too). Each output is the whole release: n̂, the 1-way marginals, the edges chosen
and their 2-way marginals. α = 1e-5."""

from __future__ import annotations

import numpy as np

from dp_engine.audit import audit_vector, looped
from dp_engine.release.synthetic import measure_mst, plan_mst, synth_domain
from dp_engine.schema import ColumnSpec, Schema
from services.studio.accounting import opendp_epsilon

SCHEMA = Schema("tiny", tuple(ColumnSpec(c, "boolean", categories=(False, True))
                              for c in "abc"))
DOMAIN = synth_domain(SCHEMA)
D = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]])
D_PRIME = np.vstack([D, [[1, 0, 1]]])          # one more patient, unlike the others
EDGE_IDS = {(0, 1): 0, (0, 2): 1, (1, 2): 2}


def _flat(codes: np.ndarray, plan, rng: np.random.Generator) -> np.ndarray:
    m = measure_mst(codes, DOMAIN, plan, rng)
    return np.concatenate([[m.count], *m.one_way, [EDGE_IDS[e] for e in m.edges],
                           *m.two_way])


def test_measurements_meet_the_charged_epsilon():
    plan = plan_mst(8.0, 3)
    charged = opendp_epsilon(plan)
    res = audit_vector(looped(lambda rng: _flat(D, plan, rng)),
                       looped(lambda rng: _flat(D_PRIME, plan, rng)),
                       charged, n_runs=16_000, alpha=1e-5, rng=np.random.default_rng(11),
                       bit_events=False)
    assert not res.violated, res.summary()
    # the audit sees more loss than any one 1-way measurement's ε (0.32 · 8 / 3): composed
    assert res.epsilon_lower_bound > plan.epsilons["one_way"] / 3, res.summary()
