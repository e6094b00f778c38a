"""The Hydra entry point: ``tabmem run model=… dataset=… test=…`` (add ``-m`` for a grid).

The configs are the package's (``tabmem.paths.conf_dir``); a user's own config groups join
them through ``--config-dir DIR`` or ``hydra.searchpath=[file:///DIR]``. ``run.py`` at the top
of the repository is a shortcut to ``main``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import hydra
from omegaconf import DictConfig

from tabmem.paths import conf_dir


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def main(cfg: DictConfig) -> None:
    """Run one cell of the grid; in a single run, a failed cell exits with status 1."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from tabmem.runner import cells_at_once, run_cell

    hydra_cfg = HydraConfig.get()
    job_dir = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    grid_dir = Path(hydra_cfg.sweep.dir) if multirun else job_dir
    at_once = cells_at_once(hydra_cfg.launcher, multirun)
    outcomes = run_cell(
        cfg,
        OmegaConf.to_yaml(cfg),
        job_dir,
        grid_dir=grid_dir,
        cells_at_once=at_once,
        in_grid=multirun,
    )
    if any(o.status == "failed" for o in outcomes) and hydra_cfg.mode == RunMode.RUN:
        sys.exit(1)


INTERRUPTED = 130  # a shell's status for a command ended by Ctrl-C (128 + SIGINT)


def run(arguments: Sequence[str], prog: str = "tabmem run") -> int:
    """Hydra's command line with ``arguments`` in this process; its exit status (1, and one
    sentence, for a cell setting that does not exist or a value of the wrong kind; 130, and
    what is kept, on Ctrl-C)."""
    problem = override_problem(arguments)
    if problem is not None:
        print(f"{prog}: {problem}", file=sys.stderr)
        return 1
    saved = sys.argv
    sys.argv = [prog, *arguments]
    helped = io.StringIO() if {"--help", "-h"} & set(arguments) else None
    try:
        with contextlib.redirect_stdout(helped) if helped else contextlib.nullcontext():
            main()
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt:  # Ctrl-C: what is kept and how to go on, not a traceback
        from tabmem.preflight import interrupted_note

        print(f"\n{prog}: {interrupted_note()}", file=sys.stderr)
        return INTERRUPTED
    finally:
        sys.argv = saved
        if helped is not None:
            print(with_tests_pointer(helped.getvalue()), end="")
    return 0


TESTS_POINTER = (
    "test: one test or a suite of tests by name (header, row_completion, memorization, …); "
    "tabmem tests lists each with what its evidence claims, whether it joins the dataset "
    "verdict, its queries and what it needs"
)


def with_tests_pointer(text: str) -> str:
    """Hydra's help with its line of ``test`` options (thirty names, no word on what each
    claims) replaced by where that is said: ``tabmem tests``."""
    lines = text.split("\n")
    groups = next((i for i, line in enumerate(lines) if line.startswith("== Config groups")), None)
    if groups is None:
        return text
    for i in range(groups + 1, len(lines)):
        if lines[i].startswith("=="):
            break
        if lines[i].startswith("test: "):
            lines[i] = TESTS_POINTER
            break
    return "\n".join(lines)


CELL_GROUPS = ("model", "dataset", "test", "transform")
# Options that change where Hydra finds configs: with them, the check leaves it all to Hydra.
SEARCH_OPTIONS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn")
# What a setting whose config value is of a kind takes (a whole-number default such as a
# timeout may take a fraction: any number fits a number).
KINDS = ((bool, "true or false"), (int | float, "a number"))


def override_problem(arguments: Sequence[str]) -> str | None:
    """One sentence for an override of a cell's setting (``test.n_rows=…``) that names no
    setting of the chosen config, or gives a value of another kind than the config's (a word
    for a number); None when there is none, and whenever in doubt (Hydra then decides).

    Hydra itself answers the first with advice to add the key with ``+``, which nothing would
    read (issue 40), and takes the second as given. Only arguments that set a cell group's
    key are checked, with one composition of the config without them.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType

    given = [a for a in arguments if not a.startswith("-")]
    if any(a.split("=")[0] in SEARCH_OPTIONS for a in arguments) or any(
        a.startswith("hydra.searchpath") for a in given
    ):
        return None
    parser = OverridesParser.create()
    try:
        parsed = parser.parse_overrides(given)
    except Exception:  # Hydra says what is wrong with the syntax, unless quotes would fix it
        return _unquoted_problem(parser, given)
    settings = [
        o
        for o in parsed
        if o.type == OverrideType.CHANGE
        and o.package is None
        and "." in o.key_or_group
        and o.key_or_group.split(".")[0] in CELL_GROUPS
    ]
    if not settings:
        return None
    cfg = _composed([o.input_line for o in parsed if o not in settings])
    if cfg is None:
        return None
    swept = {o.key_or_group for o in parsed if o.is_sweep_override()}
    swept |= set((cfg.hydra.sweeper.get("params") or {}).keys())
    for override in settings:
        group = override.key_or_group.split(".")[0]
        if group not in swept:
            problem = _setting_problem(cfg, override, group)
            if problem:
                return problem
    return None


def _unquoted_problem(parser: Any, given: list[str]) -> str | None:
    """One sentence for the first override that Hydra cannot read as written but can with its
    value quoted (``dataset.delimiter=;``); None where quoting would not help (a list or a
    dictionary written wrongly: Hydra's own message says where)."""
    for argument in given:
        key, _, value = argument.partition("=")
        if not value or value.startswith(("[", "{", "'", '"')):
            continue
        try:
            parser.parse_overrides([argument])
        except Exception:
            quoted = f'{key}="{value}"'
            try:
                parser.parse_overrides([quoted])
            except Exception:
                continue
            return (
                f"Hydra cannot read {argument} unquoted: write '{quoted}' "
                "(the single quotes keep the double ones from the shell)."
            )
    return None


def _composed(overrides: list[str]) -> DictConfig | None:
    """The config as a sweep composes it (the sweeps left out), or None where it fails."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    try:
        with initialize_config_dir(str(conf_dir()), version_base="1.3", job_name="tabmem"):
            return GlobalHydra.instance().hydra.compose_config(  # type: ignore[union-attr]
                "config",
                overrides,
                run_mode=RunMode.MULTIRUN,
                validate_sweep_overrides=False,
                with_log_configuration=False,
            )
    except Exception:  # Hydra reports it, in its own words
        return None


def _setting_problem(cfg: DictConfig, override: Any, group: str) -> str:
    """What is wrong with one override of a cell's setting in ``cfg`` ('' if nothing)."""
    from difflib import get_close_matches

    from omegaconf import OmegaConf

    key = override.key_or_group
    choice = f"{group}={cfg.hydra.runtime.choices.get(group, cfg[group].get('name', ''))}"
    missing = object()
    current = OmegaConf.select(cfg, key, default=missing, throw_on_missing=False)
    if current is missing:
        parent_key, _, leaf = key.rpartition(".")
        parent = OmegaConf.select(cfg, parent_key, default=None)
        names = [str(k) for k in parent] if OmegaConf.is_dict(parent) else []
        near = get_close_matches(leaf, names, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        where = f"{parent_key} has" if parent_key != group else "its settings are"
        listed = ", ".join(names) if names else "none"
        return f"{key} is not a setting of {choice}{hint}; {where}: {listed}."
    if override.is_sweep_override():
        return ""
    value = override.value()
    for kind, words in KINDS:  # bool first: a bool is an int to isinstance
        if isinstance(current, kind):
            if value is None or _of_kind(value, kind) or "${" in str(value):
                return ""  # null, the right kind, or an interpolation resolved later
            text = override.input_line.split("=", 1)[1]
            return f"{key} expects {words} ({choice} has {current}), not {text!r}."
    return ""


def _of_kind(value: Any, kind: Any) -> bool:
    """Whether an override's parsed value fits a setting of ``kind`` (true and false are no
    numbers)."""
    if isinstance(value, bool):
        return kind is bool
    return kind is not bool and isinstance(value, kind)
