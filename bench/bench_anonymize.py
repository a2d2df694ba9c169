"""Benchmark of the anonymizer: 1e5 records x 6 quasi-identifiers (target: <= 10 s).

Run: ``.venv/bin/python bench/bench_anonymize.py [n_rows]``. Writes ``bench/RESULTS_anonymize.md``.
The data are synthetic and correlated (age, BMI, blood pressure, PSA, a PI-RADS score, sex),
so clusters are realistic rather than uniform noise. k-anonymity, not differential privacy.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dp_engine.anonymize import anonymize  # noqa: E402


def synthetic(n: int, seed: int = 7) -> pd.DataFrame:
    """Correlated synthetic cohort with 6 quasi-identifiers and one sensitive column."""
    gen = np.random.default_rng(seed)
    age = np.clip(gen.normal(65, 8, n), 40, 90).round()
    bmi = np.clip(gen.normal(27, 4, n) + 0.03 * (age - 65), 16, 45).round(1)
    bp = np.clip(gen.normal(135, 15, n) + 0.5 * (age - 65), 90, 200).round()
    psa = np.exp(gen.normal(1.8, 0.7, n) + 0.01 * (age - 65)).round(2)
    pirads = np.clip(np.round(1 + psa / 4 + gen.normal(0, 1, n)), 1, 5).astype(int)
    sex = gen.integers(0, 2, n)
    gleason = np.where(pirads >= 4, gen.integers(6, 10, n), gen.integers(6, 8, n))
    return pd.DataFrame(
        {
            "age": age,
            "bmi": bmi,
            "bp": bp,
            "psa": psa,
            "pirads": pirads,
            "sex": sex,
            "gleason": gleason,
        }
    )


def run(n: int, k: int, method: str) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result) for one anonymization."""
    frame = synthetic(n)
    qis = ["age", "bmi", "bp", "psa", "pirads", "sex"]
    wall, cpu = time.perf_counter(), time.process_time()
    res = anonymize(frame, qis, ["gleason"], k, method=method, rng=np.random.default_rng(1))
    return time.perf_counter() - wall, time.process_time() - cpu, res


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    lines = [
        "## Anonymize (k-anonymity, not differential privacy)",
        "",
        f"`.venv/bin/python bench/bench_anonymize.py {n}` on {platform.machine()}, "
        f"Python {platform.python_version()}, "
        f"{n:,} synthetic records x 6 quasi-identifiers + 1 sensitive column; target <= 10 s "
        "for the hybrid. Wall clock and this process's CPU time; the machine is shared, so the "
        f"1-minute load average at the start ({os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores) says how much of the wall time was spent waiting.",
        "",
        "| method | k | wall s | CPU s | k achieved | SSE/SST % | IL1s | unique before -> after |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for method, k in (("hybrid", 3), ("hybrid", 5), ("hybrid", 10), ("vq", 5)):
        secs, cpu, res = run(n, k, method)
        r = res.report
        lines.append(
            f"| {method} | {k} | {secs:.2f} | {cpu:.2f} | {r.k_achieved} | {r.sse_sst_pct:.2f} | "
            f"{r.il1s:.3f} | {r.unique_before:.1%} -> {r.unique_after:.1%} |"
        )
        print(lines[-1], flush=True)
    out = Path(__file__).with_name("RESULTS_anonymize.md")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
