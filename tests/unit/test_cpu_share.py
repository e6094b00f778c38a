"""Cells that run side by side share the machine's cores: a local model gets its share."""

import os

import pytest
from omegaconf import OmegaConf

from tabmem.runner import cells_at_once, cpu_share

CORES = len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("launcher", "multirun", "expected"),
    [
        ({"n_jobs": 2}, True, 2),
        ({"n_jobs": 2}, False, 1),  # a single run is one cell
        ({"n_jobs": -1}, True, CORES),  # joblib: every core
        ({"address": None}, True, 1),  # Ray or Slurm: the cells run elsewhere
    ],
)
def test_cells_at_once_follows_the_launcher(launcher, multirun, expected):
    assert cells_at_once(OmegaConf.create(launcher), multirun) == expected


def test_the_cores_are_divided_among_the_cells_and_never_below_one():
    assert cpu_share(1) == CORES
    assert cpu_share(2) == max(1, CORES // 2)
    assert cpu_share(CORES * 4) == 1


def test_the_embedded_model_runs_on_its_share_unless_its_config_names_threads(tmp_path):
    from tabmem.api import compose_config
    from tabmem.llm.registry import build_backend

    cfg = OmegaConf.to_container(compose_config(["model=smollm2-135m"]).model, resolve=True)
    shared = build_backend(cfg, tmp_path, threads=cpu_share(2))
    assert shared.n_threads == shared.n_threads_batch == max(1, CORES // 2)
    own = build_backend({**cfg, "n_threads": 3}, tmp_path, threads=cpu_share(2))
    assert own.n_threads == own.n_threads_batch == 3
