"""The Hydra entry point: ``tabmem run model=… dataset=… test=…`` (add ``-m`` for a grid).

The configs are the package's (``tabmem.paths.conf_dir``); a user's own config groups join
them through ``--config-dir DIR`` or ``hydra.searchpath=[file:///DIR]``. ``run.py`` at the top
of the repository is a shortcut to ``main``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

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
        cfg, OmegaConf.to_yaml(cfg), job_dir, grid_dir=grid_dir, cells_at_once=at_once
    )
    if any(o.status == "failed" for o in outcomes) and hydra_cfg.mode == RunMode.RUN:
        sys.exit(1)


def run(arguments: Sequence[str], prog: str = "tabmem run") -> int:
    """Hydra's command line with ``arguments`` in this process; its exit status."""
    saved = sys.argv
    sys.argv = [prog, *arguments]
    try:
        main()
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        sys.argv = saved
    return 0
