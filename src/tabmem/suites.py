"""Suites: which tests a ``test=<suite>`` config runs, each with its config, read one way by
the runner, the dry run, the Python API, rescoring and the paper tables.

A suite lists its members once. Either its YAML composes them (``defaults:`` entries
``- /test/<member>@<member>``: each member is a section with its own ``name``), or it names
the claims its members make (``claims: [rows_seen]``): every registered test whose
``evidence`` makes one of them, claim by claim in table order, each composed from its own
``conf/test/<member>.yaml`` when the suite runs, so a new test of rows seen joins the
calibration suites by its class's ``claims`` alone. Either kind may change a member's
settings in a section of its name (``row_completion: {n_queries: 20}``), and ``suite: [...]``
(``+test.suite=[row_completion]`` on the command line) runs only the members it lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from omegaconf import DictConfig, OmegaConf

from tabmem.errors import ConfigError


def _composed_members(test_cfg: Mapping[str, Any]) -> list[str]:
    """The members a suite's YAML composes: the sections named after a test's config
    (``conf/test/<member>.yaml``) that carry its ``name`` (or, in the YAML file as written, its
    ``- /test/<member>@<member>`` defaults). Read without importing the tests, so a suite whose
    members all finished is skipped at once."""
    if "defaults" in test_cfg:
        entries = [str(e).removeprefix("/test/").split("@") for e in test_cfg["defaults"]]
        return [pair[1] for pair in entries if len(pair) == 2 and pair[0] == pair[1]]
    from tabmem.paths import conf_dir

    return [
        str(key)
        for key, value in test_cfg.items()
        if isinstance(value, Mapping)
        and value.get("name") == key
        and (conf_dir() / "test" / f"{key}.yaml").is_file()
    ]


def _claimed_members(claims: Any) -> list[str]:
    """Every registered test that claims one of ``claims``, claim by claim in table order."""
    from tabmem.battery.base import claiming_in_order

    return [name for claim in claims for name in claiming_in_order(str(claim))]


def suite_members(test_cfg: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The tests a suite runs, in order; None where ``test_cfg`` is a single test's config."""
    claims = test_cfg.get("claims")
    members = _claimed_members(claims) if claims else _composed_members(test_cfg)
    if not members:
        return None
    chosen = test_cfg.get("suite")
    if chosen:
        unknown = sorted(set(map(str, chosen)) - set(members))
        if unknown:
            raise ConfigError(f"Suite '{test_cfg.get('name')}' has no member {unknown}.")
        return tuple(str(name) for name in chosen)
    return tuple(members)


def is_suite(test_cfg: Mapping[str, Any]) -> bool:
    """Whether ``test_cfg`` (a composed ``test`` config, or its plain dict) runs several tests."""
    return suite_members(test_cfg) is not None


@cache
def _test_config(name: str) -> DictConfig:
    """``conf/test/<name>.yaml`` as Hydra composes it (its shared parts included)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    from tabmem.paths import conf_dir

    def compose() -> DictConfig:
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        return hydra.compose_config(
            None, [f"+test={name}"], run_mode=RunMode.RUN, with_log_configuration=False
        ).test

    if GlobalHydra.instance().is_initialized():  # inside `tabmem run`: its search path
        return compose()
    with initialize_config_dir(str(conf_dir()), version_base="1.3", job_name="tabmem"):
        return compose()


def member_config(test_cfg: Any, name: str) -> Any:
    """Member ``name``'s config in the suite ``test_cfg``: its section where the YAML composes
    it, else its own YAML with the suite's section of its name merged over it."""
    section = test_cfg.get(name)
    if not test_cfg.get("claims"):
        return section
    own = OmegaConf.create(OmegaConf.to_container(_test_config(name), resolve=True))
    return OmegaConf.merge(own, section) if section is not None else own


def suite_plan(test_cfg: Any) -> list[tuple[str, Any]]:
    """The tests a cell runs, each with its config: one, or each member of a suite."""
    members = suite_members(test_cfg)
    if members is None:
        return [(str(test_cfg.name), test_cfg)]
    if test_cfg.get("claims"):
        stray = sorted(
            str(key)
            for key, value in test_cfg.items()
            if isinstance(value, Mapping) and key not in _claimed_members(test_cfg.claims)
        )
        if stray:
            raise ConfigError(
                f"Suite '{test_cfg.get('name')}' sets {stray}, which claim none of "
                f"{list(test_cfg.claims)}."
            )
    return [(name, member_config(test_cfg, name)) for name in members]
