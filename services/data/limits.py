"""Caps checked before any per-column work, and the owner-review thresholds.

A file over a cap is refused with a message saying which cap and what to export instead, so a
million-column or one-huge-header upload never reaches the parser (issue 12). The thresholds
decide what the Data page puts in front of the owner (issue 13).
"""

from __future__ import annotations

from dp_engine.schema import MAX_CATEGORIES as SCHEMA_MAX_CATEGORIES

MAX_COLUMNS = 1_000
"""Columns per file: a schema the owner reviews row by row; exports for one study fit easily."""

MAX_HEADER_BYTES = 64 * 1024
"""Length of the header row; longer is refused as too long (never cut and misread)."""

MAX_CATEGORIES = SCHEMA_MAX_CATEGORIES
"""Levels in one categorical column's public list: the schema's own cap (one number for schema
files, the owner's edits and ColumnSpec itself)."""

MAX_PROPOSED_LEVELS = 100
"""An integer code column (site, centre, ...) with more levels is proposed as an identifier."""

CLAMP_ASK_SHARE = 0.01
"""A recognised clinical default that would clamp more than this share of values is not
applied: the column is proposed from the data and the page asks the owner."""

RARE_LEVEL_MIN = 10
"""A category level held by fewer records is listed for merging into "other".

Why 10: a category list is public metadata, so a level seen in a handful of records tells
every collaborator and third party that such patients exist here — the disclosure that
small-cell rules in health statistics prevent by suppressing counts below about 10. It is
also about the count that DP noise swamps: a discrete-Laplace count at ε = 1 has a standard
deviation of about 1.4, so a level under 10 records has a relative error over 14 %, outside
the owner's and the collaborator's accuracy bands. Configurable per registry.
"""

PATIENT_ROWS_PERCENTILE = 95.0
"""The proposed bound k on rows per patient: this percentile of rows per patient (rounded up).

A bound keeps sensitivities (and noise) k times the one-row case while the rows of patients
above it are left out; the 95th percentile keeps almost every row of typical patients and
stops a few heavy patients from multiplying everyone's noise. Proposed from the data, so it
is flagged until the owner confirms it or types a public fact (e.g. "at most 4 visits").
"""
