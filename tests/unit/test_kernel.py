"""The weighted kernel density shared by the neighbour model, the forest learner and the
forest scorer."""

import math

import numpy as np
import pytest

from tabmem.stats.kernel import NODES, Kernel


def test_the_density_integrates_to_one_and_weighs_its_points():
    kernel = Kernel.of(np.array([0.0, 10.0]), np.array([0.9, 0.1]), span=10.0)
    grid = np.linspace(-20, 30, 20001)
    density = np.exp(kernel.log_densities(grid))
    assert np.trapezoid(density, grid) == pytest.approx(1.0, abs=1e-6)
    assert kernel.log_density(0.0) > kernel.log_density(10.0)
    assert kernel.log_density(3.0) == pytest.approx(kernel.log_densities(np.array([3.0]))[0])


def test_the_bandwidth_follows_silvermans_rule_above_a_thousandth_of_the_span():
    points = np.arange(100.0)
    kernel = Kernel.of(points, np.full(100, 0.01), span=99.0)
    assert kernel.bandwidth == pytest.approx(points.std() * 100**-0.2)
    assert Kernel.of(points, np.full(100, 0.01), 99.0, count=10_000).bandwidth == pytest.approx(
        points.std() * 10_000**-0.2
    )
    agreeing = Kernel.of(np.array([5.0, 5.0]), np.array([0.5, 0.5]), span=40.0)
    assert agreeing.bandwidth == pytest.approx(0.04)


def test_moments_are_read_at_weighted_quantiles():
    kernel = Kernel.of(np.array([3.0, 1.0, 2.0]), np.array([0.0, 0.5, 0.5]), span=2.0)
    nodes = kernel.nodes()
    assert nodes.size == NODES and set(nodes.tolist()) == {1.0, 2.0}  # 3 weighs nothing
    mean, sd = kernel.log_moments()
    logs = kernel.log_densities(nodes)
    assert mean == pytest.approx(logs.mean()) and sd == pytest.approx(logs.std())
    # an offset shifts the mean, a cap bounds every log
    shifted, same = kernel.log_moments(offset=math.log(0.1))
    assert shifted == pytest.approx(mean + math.log(0.1)) and same == pytest.approx(sd)
    capped, flat = kernel.log_moments(offset=100.0, cap=0.0)
    assert capped == 0.0 and flat == 0.0
