"""The cohort description an owner writes for a dataset: checked before it is stored.

The text goes to everyone a published page of the dataset is for, so it is short, plain text
(no control characters, no markup is interpreted: Dash and the HTML export escape it) and
written in words: a pasted table (several lines of comma-, semicolon- or tab-separated values)
is refused, so that rows of patient data cannot end up on a partner's screen by mistake.
"""

from __future__ import annotations

import re
import unicodedata

from dp_engine.errors import DPError
from services.publish.records import Cohort

LIMITS = {"period": 120, "inclusion": 1000, "source": 300}
"""Most characters of each field."""
LABELS = {"period": "Period", "inclusion": "Inclusion criteria", "source": "Source"}
MAX_LINES = 12
_ROW = re.compile(r"^[^,;\t]*([,;\t][^,;\t]*){3,}$")   # four or more delimited cells
TABLE_LIKE = 3
"""A field with this many lines that read as delimited rows is taken for a pasted table."""


class CohortError(DPError):
    """A cohort description that cannot be stored as written (the message says why)."""


def _clean(name: str, value: object) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CohortError(f"{LABELS[name]}: write plain text.")
    text = unicodedata.normalize("NFC", value).replace("\r\n", "\n").replace("\r", "\n")
    if any(unicodedata.category(ch) == "Cc" and ch not in "\n\t" for ch in text):
        raise CohortError(f"{LABELS[name]}: remove the control characters (pasted from a "
                          "binary file?).")
    lines = [" ".join(line.split()) for line in text.split("\n")]
    if name != "inclusion":
        lines = [" ".join(lines)]
    text = "\n".join(line for line in lines if line).strip()
    if len(text) > LIMITS[name]:
        raise CohortError(f"{LABELS[name]}: at most {LIMITS[name]} characters "
                          f"({len(text)} written).")
    if text.count("\n") + 1 > MAX_LINES:
        raise CohortError(f"{LABELS[name]}: at most {MAX_LINES} lines.")
    if sum(bool(_ROW.match(line)) for line in text.split("\n")) >= TABLE_LIKE:
        raise CohortError(f"{LABELS[name]}: this reads like rows of a table. Describe the "
                          "cohort in words; never paste patient data here (every reader of "
                          "the page sees it).")
    return text


def checked(dataset_id: str, period: object, inclusion: object, source: object) -> Cohort:
    """A ``Cohort`` from untrusted form values, or ``CohortError`` naming the field."""
    return Cohort(str(dataset_id), period=_clean("period", period),
                  inclusion=_clean("inclusion", inclusion), source=_clean("source", source))
