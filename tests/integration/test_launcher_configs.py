"""The scale-out launcher configs compose with the overrides docs/ show (no cluster needed)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from tabmem.paths import conf_dir


def launcher(overrides: list[str]):
    with initialize_config_dir(config_dir=str(conf_dir()), version_base=None):
        return compose("config", overrides=overrides, return_hydra_config=True).hydra.launcher


def test_ray_launcher_takes_a_local_cpu_limit_and_a_cluster_address():
    pytest.importorskip("hydra_plugins.hydra_ray_launcher.ray_launcher")
    cfg = launcher(["hydra/launcher=ray", "hydra.launcher.ray.init.num_cpus=2"])
    assert cfg._target_.endswith("RayLauncher")
    assert cfg.ray.init.num_cpus == 2
    assert cfg.ray.init.address is None
    assert (
        launcher(["hydra/launcher=ray", "hydra.launcher.ray.init.address=auto"]).ray.init["address"]
        == "auto"
    )


def test_slurm_launcher_takes_a_partition():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher.submitit_launcher")
    cfg = launcher(["hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu"])
    assert cfg._target_.endswith("SlurmLauncher")
    assert (cfg.partition, cfg.gpus_per_node) == ("gpu", 4)
