"""The synthetic copy's privacy loss from OpenDP's accountant (not our arithmetic).

Every MST measurement is rebuilt as the OpenDP measurement with the same noise: Laplace on a
count vector (L1 distance) for n̂ and the marginals, report noisy max with exponential noise
(OpenDP's pure-DP ``make_noisy_max``, non-monotone scores) for each tree edge. Basic
composition of each group is mapped at d_in = k, the most one patient moves any count vector
(L1) or any edge score (L∞) when added or removed. The two groups live in different metric
spaces, so their ε are added. OpenDP is imported only here, when a copy is made.
"""

from __future__ import annotations

from dp_engine.release.synthetic import MSTPlan


def opendp_epsilon(plan: MSTPlan) -> float:
    """ε (pure DP, add/remove-one patient) of ``plan``'s measurements, as OpenDP maps it."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    vectors = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    d_in = float(plan.contribution)
    laplace = [dp.m.make_laplace(vectors, dp.l1_distance(T=float), scale=s)
               for s in (plan.count_scale, *[plan.one_way_scale] * plan.n_attributes,
                         *[plan.two_way_scale] * plan.n_edges)]
    epsilon = float(dp.c.make_composition(laplace).map(d_in))
    if plan.n_edges:
        scores = dp.linf_distance(T=float, monotonic=False)
        select = [dp.m.make_noisy_max(vectors, scores, dp.max_divergence(),
                                      scale=plan.select_scale)] * plan.n_edges
        epsilon += float(dp.c.make_composition(select).map(d_in))
    return epsilon
