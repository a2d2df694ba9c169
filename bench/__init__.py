"""Benchmark scripts (not tests): engine vs the numpy limit and vs OpenDP / diffprivlib.

Run everything with ``python -m bench.run_all [--quick]``; it rewrites ``bench/RESULTS.md``.
"""
