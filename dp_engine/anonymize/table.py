"""A table of mapped attributes: codes matrix, mapped distances, and the spaces clustering uses."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dp_engine.anonymize.distances import (
    AttributeKind,
    MappedAttribute,
    Scaling,
    kind_for,
    map_attribute,
    set_weights,
)
from dp_engine.errors import SchemaError
from dp_engine.schema import Schema

# Exact-match attributes are placed this many query radii apart in the k-d tree space.
_SEPARATION = 4.0


@dataclass
class MappedTable:
    """The mapped attributes of the chosen columns, in a fixed order."""

    attrs: list[MappedAttribute]
    scaling: Scaling
    target_mean: float

    @property
    def n(self) -> int:
        return int(self.attrs[0].codes.size) if self.attrs else 0

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.attrs]

    def codes(self) -> np.ndarray:
        """(n, d) matrix of codes."""
        if not self.attrs:
            return np.zeros((0, 0), dtype=np.int64)
        return np.column_stack([a.codes for a in self.attrs])

    def distances(self, codes: np.ndarray, centre: np.ndarray) -> np.ndarray:
        """(n, d) mapped distances between rows of ``codes`` and ``centre`` (broadcast)."""
        return (
            np.column_stack(
                [a.distance(codes[..., j], centre[..., j]) for j, a in enumerate(self.attrs)]
            )
            if self.attrs
            else np.zeros((codes.shape[0], 0))
        )

    def embedding(self, codes: np.ndarray) -> np.ndarray:
        """Euclidean embedding for MDAV: ordered coordinates, one-hot blocks for the others.

        Two nominal categories end up ``weight`` apart; hierarchical codes get one one-hot
        block per prefix length, scaled so the squared distance grows with the levels that
        differ.
        """
        blocks = []
        for j, a in enumerate(self.attrs):
            c = codes[:, j]
            if a.kind.ordered:
                blocks.append(a.coord[c][:, None])
            elif a.kind is AttributeKind.NOMINAL:
                blocks.append(np.eye(a.n_values)[c] * (a.weight / math.sqrt(2)))
            else:
                assert a.prefix_ids is not None
                scale = a.weight / math.sqrt(2 * max(a.levels, 1))
                for lev in range(a.levels):
                    ids = a.prefix_ids[c, lev]
                    width = int(a.prefix_ids[:, lev].max()) + 1
                    blocks.append(np.eye(width)[ids] * scale)
        if not blocks:
            return np.zeros((codes.shape[0], 0))
        return np.hstack(blocks).astype(float)

    def spread(self) -> np.ndarray:
        """Typical mapped distance per attribute (mean pairwise), 1 if degenerate."""
        out = []
        for a in self.attrs:
            s = a.raw_mean_distance() * (1.0 if a.kind.ordered else a.weight)
            out.append(s if s > 0 else 1.0)
        return np.asarray(out)

    def kd_coords(self, codes: np.ndarray, radii: np.ndarray) -> np.ndarray:
        """Coordinates where an L-infinity ball of radius 1/2 keeps every pair within radii.

        Ordered attribute j: coordinate / radius_j. Nominal: exact match (code spaced
        ``_SEPARATION`` apart) unless radius >= weight, then ignored. Hierarchical: the
        id of the prefix every member must share, of length ceil(L (1 - radius/weight)).
        """
        cols = []
        for j, a in enumerate(self.attrs):
            c = codes[:, j]
            r = float(radii[j])
            if a.kind.ordered:
                if r > 0:
                    cols.append(a.coord[c] / r)
                else:
                    cols.append(c * _SEPARATION)
            elif a.kind is AttributeKind.NOMINAL:
                cols.append(np.zeros(c.size) if r >= a.weight else c * _SEPARATION)
            else:
                need = math.ceil(a.levels * (1 - r / a.weight) - 1e-9) if a.weight > 0 else 0
                need = min(max(need, 0), a.levels)
                if need == 0:
                    cols.append(np.zeros(c.size))
                else:
                    assert a.prefix_ids is not None
                    cols.append(a.prefix_ids[c, need - 1] * _SEPARATION)
        if not cols:
            return np.zeros((codes.shape[0], 0))
        return np.column_stack(cols).astype(float)


def build_table(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    schema: Schema | None = None,
    kinds: Mapping[str, str] | None = None,
    categories: Mapping[str, tuple] | None = None,
    scaling: Scaling | str = Scaling.RANK,
) -> MappedTable:
    """Map the given columns of ``frame``; kinds come from ``kinds``, the schema, or dtypes."""
    scaling = Scaling(scaling)
    kinds = dict(kinds or {})
    categories = dict(categories or {})
    attrs: list[MappedAttribute] = []
    for name in columns:
        if name not in frame.columns:
            raise SchemaError(f"The data has no column named '{name}'.")
        spec = schema.column(name) if schema is not None and name in schema else None
        kind = AttributeKind(kinds[name]) if name in kinds else kind_for(spec, frame[name])
        cats = categories.get(name)
        if cats is None and spec is not None and spec.categories:
            cats = spec.categories
        attrs.append(map_attribute(name, frame[name], kind, scaling, cats))
    target = set_weights(attrs, scaling)
    return MappedTable(attrs, scaling, target)
