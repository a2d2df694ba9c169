"""The env file (``/etc/cohort/cohort.env``): one format that systemd and bash read alike.

systemd reads it with ``EnvironmentFile=``; an administrator's shell reads it with
``set -a; . FILE; set +a``; the CLI reads it with ``--env-file``. The two loaders differ
(bash removes quotes inside a value, expands ``$`` and splits words at spaces; systemd does
neither), so only the subset they agree on is accepted, and anything else is refused with the
line number and the fix:

- ``# comment`` lines and blank lines;
- ``KEY=value`` where the value has no space, quote, ``$``, backtick, backslash or other
  character special to the shell;
- ``KEY='any text'`` (JSON included) without ``'``, ``$``, backtick or backslash inside.
"""

from __future__ import annotations

import re
from pathlib import Path

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLAIN = re.compile(r"^[A-Za-z0-9_\-./:@+=,%^]*$")
_NEVER = ("$", "`", "\\", "\n")


class EnvFileError(ValueError):
    """A line of the env file that systemd and bash would not read the same way."""


def parse_env_text(text: str, source: str = "env file") -> dict[str, str]:
    """The variables of an env file's text (see the module docstring for the format)."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{source}, line {number}"
        key, sep, value = line.partition("=")
        if not sep or not _NAME.match(key):
            raise EnvFileError(f"{where}: write KEY=value with no space around '=' "
                               f"(got {line.strip()[:40]!r}).")
        out[key] = _value(value, where, key)
    return out


def _value(value: str, where: str, key: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == "'":
        inner = value[1:-1]
        if "'" in inner or any(c in inner for c in _NEVER):
            raise EnvFileError(f"{where}: {key}'s quoted value must not contain ', $, ` or "
                               "\\ (systemd and bash read them differently).")
        return inner
    if _PLAIN.match(value):
        return value
    raise EnvFileError(f"{where}: {key}'s value has a space, quote or shell character: put it "
                       f"in single quotes, e.g. {key}='...' (bash would read it differently "
                       "from systemd).")


def read_env_file(path: str | Path) -> dict[str, str]:
    """The variables of the env file at ``path``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EnvFileError(f"The env file {path} cannot be read ({exc.strerror}).") from None
    return parse_env_text(text, str(path))
