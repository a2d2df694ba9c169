"""SQLAlchemy dialects and functions whose exact semantics differ between engines.

* ``rint``: round half to even, as numpy. DuckDB: ``round_even(x, 0)``; Spark: ``rint``
  (Java ``Math.rint``). PostgreSQL's ``round(double precision)`` leaves ties to the platform,
  so it gets an explicit half-even formula: floor, then +1 above one half, and at exactly
  one half only when the floor is odd (x − floor(x) is exact in double precision).
* DuckDB and Spark SQL are compiled with their own small dialects: DuckDB takes PostgreSQL's
  SQL with ``?`` parameters; Spark SQL quotes identifiers with backticks and binds named
  parameters (``:name``, Spark ≥ 3.4). Identifiers are always quoted by the library and
  every value is a bound parameter.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Double, case, cast, func
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.engine import default
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import compiler
from sqlalchemy.sql.functions import GenericFunction


class rint(GenericFunction):  # noqa: N801 - SQL function name
    """Round half to even to a whole number (double precision)."""

    type = Double()
    inherit_cache = True


@compiles(rint, "duckdb")
def _rint_duckdb(element: rint, compiler_: Any, **kw: Any) -> str:
    return f"round_even({compiler_.process(element.clauses, **kw)}, 0)"


@compiles(rint, "spark")
def _rint_spark(element: rint, compiler_: Any, **kw: Any) -> str:
    return f"rint({compiler_.process(element.clauses, **kw)})"


@compiles(rint, "postgresql")
def _rint_postgres(element: rint, compiler_: Any, **kw: Any) -> str:
    (x,) = element.clauses.clauses
    below = func.floor(x)
    frac = x - below
    odd = cast(below, BigInteger) % 2 != 0
    expr = below + case((frac > 0.5, 1.0), (frac < 0.5, 0.0), (odd, 1.0), else_=0.0)
    return compiler_.process(expr, **kw)


class DuckDBDialect(PGDialect):
    """PostgreSQL's SQL compiler with DuckDB's name and ``?`` parameters (compile only)."""

    name = "duckdb"
    supports_statement_cache = False

    def __init__(self, **kw: Any) -> None:
        super().__init__(paramstyle="qmark", **kw)


class _SparkPreparer(compiler.IdentifierPreparer):
    def __init__(self, dialect: Any, **kw: Any) -> None:
        super().__init__(dialect, initial_quote="`", escape_quote="`", **kw)


class _SparkTypes(compiler.GenericTypeCompiler):
    def visit_double(self, type_: Any, **kw: Any) -> str:
        return "DOUBLE"


class SparkDialect(default.DefaultDialect):
    """Spark SQL: backtick identifiers, ``:name`` parameters (compile only)."""

    name = "spark"
    preparer = _SparkPreparer
    type_compiler_cls = _SparkTypes
    supports_statement_cache = False

    def __init__(self, **kw: Any) -> None:
        super().__init__(paramstyle="named", **kw)


def compile_sql(stmt: Any, dialect: Any) -> tuple[str, Any]:
    """(SQL text, parameters) for ``dialect``: a list for ``?``, a dict for ``:name``."""
    compiled = stmt.compile(dialect=dialect)
    params = compiled.construct_params()
    if dialect.paramstyle == "qmark":
        return str(compiled), [params[name] for name in compiled.positiontup]
    return str(compiled), dict(params)

