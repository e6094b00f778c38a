"""Entry point: ``python run.py model=… dataset=… test=…`` (add ``-m`` for a grid).

Run ``python run.py --help`` for the config groups and their options.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> None:
    """Run one cell of the grid; in a single run, a failed cell exits with status 1."""
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


if __name__ == "__main__":
    main()
