"""``tabmem tests``: every registered test in one line: what its ``evidence`` claims, whether it
joins the dataset verdict, what it needs of a model, and the settings that set how many queries it
sends, by default and in the power grid's setting (``test=calibration_papers``).

Each fact comes from its one place: a test's claim and needs from its class (the registry of
``tabmem.battery.base``), the meaning of each claim from ``CLAIM_TEXT`` below (docs/tests.md's
claims table says the same, and a test checks it), the query counts from ``conf/test/*.yaml``
composed as ``tabmem run test=<name>`` composes them, and the suites from the suites' YAML.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

CLAIM_TEXT: dict[str, tuple[str, str]] = {
    "rows_seen": ("rows seen", ": the model has read this file's rows"),
    "knowledge": ("knowledge", " of the dataset: its existence, names, values, distribution"),
    "learning": ("learning", " from examples in the prompt"),
    "forecast": ("forecast", ": the model knows a series' values after a cutoff"),
}
"""Each claim a test's ``evidence`` can make (``tabmem.battery.base.CLAIMS``): its short name and
the rest of its sentence, as the claims table of docs/tests.md words it."""
JOINS_VERDICT = "rows_seen"
"""The claim whose tests join the dataset verdict (``tabmem.report.dataset_verdicts``)."""
NEEDS_TEXT = {
    "generate": "text",
    "logprobs": "log-probs",
    "token_moments": "token moments",
    "fit": "fitting",
}
"""A model capability (``tabmem.llm.base``) as the list says it."""
COUNT_SETTINGS = (
    "n_queries",
    "split_rows",
    "n_samples",
    "n_rows",
    "n_per_feature",
    "row_counts",
    "n_test_rows",
    "n_problems",
    "steps_per_period",
)
"""The settings that set how many queries a test sends (rows asked, samples drawn, rows
scored), in the order the list looks for them; a test's ``sampler`` section is looked in too."""
SETTINGS = {"papers": "calibration_papers"}
"""Other settings whose counts the list shows where they differ: label -> suite."""


@dataclass(frozen=True)
class TestEntry:
    """One registered test as the list shows it."""

    __test__ = False  # not a pytest class

    name: str
    claim: str
    needs: tuple[str, ...]
    counts: str

    @property
    def joins_verdict(self) -> bool:
        return self.claim == JOINS_VERDICT


@contextmanager
def _composer() -> Iterator[Any]:
    """Compose ``config`` with overrides, as ``tabmem run`` composes a cell's."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from tabmem.paths import conf_dir

    if GlobalHydra.instance().is_initialized():
        yield lambda overrides: compose("config", overrides)
        return
    with initialize_config_dir(str(conf_dir()), version_base="1.3", job_name="tabmem"):
        yield lambda overrides: compose("config", overrides)


def count_settings(test_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a test's config that set its number of queries (``sampler.<key>`` for a
    sampling section), with their values."""
    found = {}
    sections: list[tuple[str, Mapping[str, Any]]] = [("", test_cfg)]
    if isinstance(test_cfg.get("sampler"), Mapping):
        sections.append(("sampler.", test_cfg["sampler"]))
    for prefix, section in sections:
        for key in COUNT_SETTINGS:
            if key in section and section[key] is not None:
                found[f"{prefix}{key}"] = section[key]
                break
    return found


def _value(value: Any) -> str:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


def counts_text(default: Mapping[str, Any], others: Mapping[str, Mapping[str, Any]]) -> str:
    """``key=value`` of each count setting, and ``(label value)`` where another setting
    differs; ``-`` for a test that sets its number of queries otherwise (docs/tests.md)."""
    parts = []
    for key, value in default.items():
        text = f"{key}={_value(value)}"
        for label, counts in others.items():
            if key in counts and counts[key] != value:
                text += f" ({label} {_value(counts[key])})"
        parts.append(text)
    return ", ".join(parts) or "-"


def test_entries() -> list[TestEntry]:
    """Every registered test, claim by claim in table order."""
    from omegaconf import OmegaConf

    from tabmem.battery.base import CLAIMS, claiming_in_order, needs_of
    from tabmem.suites import suite_plan

    names = [(claim, name) for claim in CLAIMS for name in claiming_in_order(claim)]
    entries = []
    with _composer() as compose:
        plain = {
            name: OmegaConf.to_container(compose([f"test={name}"]).test, resolve=True)
            for _, name in names
        }
        others: dict[str, dict[str, dict[str, Any]]] = {label: {} for label in SETTINGS}
        for label, suite in SETTINGS.items():
            for name, cfg in suite_plan(compose([f"test={suite}"]).test):
                values = OmegaConf.to_container(cfg, resolve=True)
                others[label][name] = count_settings(values)  # type: ignore[arg-type]
    for claim, name in names:
        default = count_settings(plain[name])  # type: ignore[arg-type]
        at = {label: found[name] for label, found in others.items() if name in found}
        needs = tuple(NEEDS_TEXT.get(n, n) for n in sorted(needs_of(name)))
        entries.append(TestEntry(name, claim, needs, counts_text(default, at)))
    return entries


def suites() -> dict[str, tuple[str, ...]]:
    """Each suite ``test=`` takes, with its members (the suites' YAML, as the runner reads
    it)."""
    import yaml

    from tabmem.paths import conf_dir
    from tabmem.suites import suite_members

    found = {}
    for path in sorted((conf_dir() / "test").glob("*.yaml")):
        members = suite_members(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
        if members:
            found[path.stem] = members
    return found


def catalog_lines(width: int = 100) -> list[str]:
    """The list: a header, one line per test, what the columns mean, then the suites."""
    from tabmem.report.answer import GAP, column_widths

    entries = test_entries()
    header = ["test", "claims", "in verdict", "needs", "queries"]
    rows = [
        [
            e.name,
            CLAIM_TEXT[e.claim][0],
            "yes" if e.joins_verdict else "no",
            " or ".join(e.needs),
            e.counts,
        ]
        for e in entries
    ]
    widths = column_widths(header[:-1], [r[:-1] for r in rows])

    def line(cells: Sequence[str]) -> str:
        return GAP.join(c.ljust(w) for c, w in zip(cells[:-1], widths, strict=True)) + (
            GAP + cells[-1]
        )

    lines = ["Every test of tabmem (test=<name>): what its evidence claims, what it costs.", ""]
    lines += [line(header), *(line(r) for r in rows), ""]
    lines += ["claims: what a test's evidence says about the model:"]
    lines += [f"  {label}{rest}" for label, rest in CLAIM_TEXT.values()]
    lines += [
        "in verdict: yes where the test's p-value joins the dataset verdict (two or more such",
        "  tests of one model on one file combine into one answer: docs/tests.md).",
        "needs: what the model must give (any one of them); log-probs need a backend that scores",
        "  text (docs/backends.md), fitting is a statistical baseline's.",
        "queries: the settings that set how many queries the test sends, at their defaults;",
        "  (papers N): N in test=calibration_papers, the papers' counts; -: no such setting (a few",
        "  queries: docs/tests.md). Change one with test.<setting>=.",
        "",
        "Suites (test=<suite>, each member its own MLflow run):",
    ]
    for name, members in suites().items():
        lines += _wrapped(f"  {name}: ", ", ".join(members), width)
    return lines


def _wrapped(lead: str, text: str, width: int) -> list[str]:
    """``lead`` then ``text``, wrapped at spaces within ``width``, continuation lines indented."""
    import textwrap

    return textwrap.wrap(
        lead + text,
        width=max(width, 40),
        subsequent_indent=" " * 4,
        break_long_words=False,
        break_on_hyphens=False,
    )
