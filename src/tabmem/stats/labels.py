"""Reading a class label out of a model's free-text answer.

Models answer ``Iris-setosa``, ``species = Iris-setosa``, ``"Setosa".``, or a whole row of
``Feature = Value`` pairs. The answer is read in three steps, stopping at the first that
gives exactly one label:

1. the value after the last ``<target> =`` (or ``<target>:``), when the answer names the target;
2. the answer's first line, compared with every label (case, quotes, a final period and
   ``1`` vs ``1.0`` ignored);
3. the labels found as whole words in that line, longer ones first (``Not Survived`` before
   ``Survived``).

Anything else is unparseable (None): scored wrong and counted apart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tabmem.stats.scoring import strip_code_fence


def normalise(text: str) -> str:
    """A label as compared: stripped of space, quotes and a final period, lower case, numbers
    by value (``1.0`` -> ``1``)."""
    value = text.strip().strip("\"'`").strip()
    value = value.removesuffix(".").strip() if not re.fullmatch(r"\d+\.", value) else value
    try:
        number = float(value)
    except ValueError:
        return " ".join(value.lower().split())
    return repr(int(number)) if number.is_integer() else repr(number)


def _named_value(answer: str, target: str) -> str | None:
    pattern = rf"(?<![\w-]){re.escape(target)}\s*[=:]\s*(?P<value>[^,\n]*)"
    matches = list(re.finditer(pattern, answer, flags=re.IGNORECASE))
    return matches[-1]["value"] if matches else None


def _exact(candidate: str, labels: Sequence[str]) -> str | None:
    key = normalise(candidate)
    hits = [label for label in labels if normalise(label) == key]
    return hits[0] if len(hits) == 1 else None


def _contained(candidate: str, labels: Sequence[str]) -> str | None:
    """The one label found as a whole word in ``candidate``; spans of longer labels are taken
    first, so a label inside a longer one does not count twice."""
    text = candidate.lower()
    taken: list[tuple[int, int]] = []
    found = set()
    for label in sorted(labels, key=len, reverse=True):
        pattern = rf"(?<![\w-]){re.escape(label.strip().lower())}(?![\w-]|\.\w)"
        for match in re.finditer(pattern, text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            taken.append(match.span())
            found.add(label)
    return found.pop() if len(found) == 1 else None


def parse_label(answer: str, labels: Sequence[str], target: str) -> str | None:
    """The label a free-text answer gives, or None when it gives none or several."""
    text = strip_code_fence(answer).strip()
    if not text:
        return None
    named = _named_value(text, target) if target else None
    candidates = [named] if named is not None else []
    candidates.append(text.splitlines()[0])
    for candidate in candidates:
        label = _exact(candidate, labels) or _contained(candidate, labels)
        if label is not None:
            return label
    return None
