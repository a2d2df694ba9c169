"""Cluster-based anonymization (k-anonymity, not differential privacy).

Implements Miche et al., "Data anonymization as a vector quantization problem": per-attribute
distances on one comparable scale, clusters within radii, outliers pushed into the crowd,
sensitive columns flattened or stirred, with MDAV as the baseline and a hybrid default that
guarantees exact k-anonymity. Pure: numpy, pandas and scipy only.
"""

from dp_engine.anonymize.distances import AttributeKind, MappedAttribute, Scaling, prefix_distance
from dp_engine.anonymize.errors import AnonymizationError
from dp_engine.anonymize.mdav import mdav_groups
from dp_engine.anonymize.pipeline import (
    LABEL,
    AnonymizationResult,
    Centroid,
    Method,
    anonymize,
)
from dp_engine.anonymize.report import AnonymizationReport, class_sizes
from dp_engine.anonymize.sensitive import SensitiveMode
from dp_engine.anonymize.vq import OutlierStrategy

__all__ = [
    "LABEL",
    "AnonymizationError",
    "AnonymizationReport",
    "AnonymizationResult",
    "AttributeKind",
    "Centroid",
    "MappedAttribute",
    "Method",
    "OutlierStrategy",
    "Scaling",
    "SensitiveMode",
    "anonymize",
    "class_sizes",
    "mdav_groups",
    "prefix_distance",
]
