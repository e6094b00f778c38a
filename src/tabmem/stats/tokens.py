"""The first token of a row: by the model's own tokenizer, or by a fixed rule for API models.

API models do not expose their tokenizer, so their first token is defined on the text:
an optional minus sign with the digits after it (at most ``digits`` of them, as common
BPE tokenizers split numbers into groups of up to three digits), else a run of letters,
else the first character. The minus sign stays with its digits so that a column of
negative numbers (longitudes) does not make the first token constant.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_LEAD = 32
"""Only this many leading characters are tokenized: enough for any first token."""


def rule_first_token(row: str, digits: int = 3) -> str:
    """The first token of ``row`` by the documented text rule (for models without a tokenizer)."""
    number = re.match(rf"-?\d{{1,{max(digits, 1)}}}", row)
    if number:
        return number.group(0)
    word = re.match(r"[^\W\d_]+", row)
    if word:
        return word.group(0)
    return row[:1]


def first_token(row: str, tokenize: Callable[[str], list[str] | None], digits: int = 3) -> str:
    """The first non-empty token of ``row`` as ``tokenize`` splits it; the text rule when
    ``tokenize`` returns None (API models)."""
    if not row:
        return ""
    pieces = tokenize(row[:_LEAD])
    if pieces is None:
        return rule_first_token(row, digits)
    return next((p for p in pieces if p), "")
