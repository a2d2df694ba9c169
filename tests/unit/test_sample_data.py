"""The synthetic PI-RADS cohort: byte-identical regeneration, Table 2's columns, clinical shape."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dp_engine.schema import ColumnKind, ColumnRole
from services.data.registry import SAMPLE_CSV, SAMPLE_SCHEMA, DatasetRegistry
from services.data.schema_files import read_schema_file

ROOT = Path(__file__).resolve().parents[2]

# Table 2 of the PyDPLib paper, in its order.
TABLE_2 = [
    "Anonym_ID", "RequestRadiologyDepartmentCode", "ProcedureValidatingPhysicianName",
    "LastModified", "Age", "Year", "Gleason score", "PCA_no_PIRADS_defined", "Follow up",
    "PIRADS score", "Number_of_Lesions", "Prostatitis", "BPH",
    "Primary_TU_LocalRecurrence_or_Progress", "Therapy", "TURP surgery",
]


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    return pd.read_csv(SAMPLE_CSV, keep_default_na=False, dtype=str)


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> pd.DataFrame:
    registry = DatasetRegistry(tmp_path_factory.mktemp("store"))
    return registry.get("pirads").frame


def test_regeneration_is_byte_identical(tmp_path):
    out = tmp_path / "again.csv"
    subprocess.run([sys.executable, str(ROOT / "sample_data" / "generate.py"), str(out)],
                   check=True, capture_output=True)
    assert out.read_bytes() == SAMPLE_CSV.read_bytes()


def test_columns_are_table_2_and_920_rows(raw):
    assert list(raw.columns) == TABLE_2
    assert len(raw) == 920
    assert raw["Anonym_ID"].is_unique


def test_schema_file_matches_csv_and_is_public_metadata():
    schema = read_schema_file(SAMPLE_SCHEMA)
    assert schema.names == TABLE_2
    assert schema.confirmed and not schema.flagged_columns()
    kinds = {c.name: c.kind for c in schema.columns}
    assert kinds["Age"] is ColumnKind.NUMERIC
    assert kinds["LastModified"] is ColumnKind.DATE
    assert kinds["PIRADS score"] is ColumnKind.ORDINAL
    assert kinds["BPH"] is ColumnKind.BOOLEAN
    assert kinds["Prostatitis"] is ColumnKind.CATEGORICAL
    assert schema.column("PIRADS score").categories == (1, 2, 3, 4, 5)
    assert schema.column("Gleason score").bounds() == (6.0, 10.0)
    assert schema.column("Age").bin_width == 5
    for hidden in ("Anonym_ID", "ProcedureValidatingPhysicianName"):
        assert not schema.column(hidden).queryable
        assert schema.column(hidden).role is ColumnRole.DIRECT_IDENTIFIER


def test_loading_with_its_schema_loses_nothing(tmp_path):
    ds = DatasetRegistry(tmp_path).get("pirads")
    assert ds.load_report.rows == 920
    assert ds.load_report.dropped == {} and ds.load_report.clamped == {}
    assert ds.load_report.open_ended == {"Number_of_Lesions": 15}


def test_normalized_types(cohort):
    assert cohort["Age"].dtype == "float64"
    assert str(cohort["PIRADS score"].dtype) == "Int64"
    assert str(cohort["BPH"].dtype) == "boolean"
    assert pd.api.types.is_datetime64_any_dtype(cohort["LastModified"])
    assert set(cohort["Prostatitis"].dropna()) == {"n", "chr", "y", "acute", "acute on chronic"}


def test_dates_and_years_are_2017_2018(cohort):
    assert cohort["LastModified"].dt.year.between(2017, 2018).all()
    assert set(cohort["Year"].dropna()) == {2017, 2018}


def test_ages_mostly_50_to_80(cohort):
    age = cohort["Age"].dropna()
    assert age.between(50, 80).mean() > 0.8
    assert age.min() >= 20 and age.max() <= 100


def test_high_pirads_peak_in_60s_and_70s(cohort):
    decade = (cohort["Age"] // 10 * 10)
    high = cohort["PIRADS score"] >= 4
    by_decade = decade[high.fillna(False)].value_counts()
    assert by_decade.idxmax() in (60, 70)
    assert by_decade.get(60, 0) + by_decade.get(70, 0) > 0.6 * by_decade.sum()
    mean_age = cohort.groupby("PIRADS score")["Age"].mean()
    assert mean_age.between(60, 70).all()


def test_gleason_rises_with_pirads(cohort):
    both = cohort[["PIRADS score", "Gleason score"]].dropna().astype(float)
    rho, p = stats.spearmanr(both["PIRADS score"], both["Gleason score"])
    assert rho > 0.25 and p < 1e-4
    biopsied = cohort.groupby("PIRADS score")["Gleason score"].apply(lambda s: s.notna().mean())
    assert biopsied.is_monotonic_increasing


def test_bph_more_frequent_with_age(cohort):
    groups = pd.cut(cohort["Age"], [0, 60, 70, 200])
    share = cohort.groupby(groups, observed=True)["BPH"].mean()
    assert share.is_monotonic_increasing and share.iloc[-1] - share.iloc[0] > 0.3


def test_realistic_gaps_and_rare_categories(raw, cohort):
    assert (raw["Number_of_Lesions"] == ">3").sum() > 0  # int column sometimes written as text
    missing = cohort.isna().mean()
    assert 0 < missing["Age"] < 0.05 and 0 < missing["Prostatitis"] < 0.15
    rare = ("Therapy", "RequestRadiologyDepartmentCode", "Primary_TU_LocalRecurrence_or_Progress")
    for col in rare:
        share = cohort[col].value_counts(normalize=True)
        assert share.min() < 0.02, col
    assert set(np.unique(cohort["Gleason score"].dropna())) <= {6, 7, 8, 9, 10}
