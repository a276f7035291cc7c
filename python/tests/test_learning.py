"""A real client learns through the Gymnasium vector API: the CleanRL-style NumPy PPO
of python/examples/ppo_numpy.py on `gymnasium.make_vec("rlrig/CartPole-v1")`."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ppo_numpy.py"


def load_example():
    spec = importlib.util.spec_from_file_location("ppo_numpy", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("seed", [1, 2])
def test_numpy_ppo_learns_cartpole_through_make_vec(seed):
    returns = load_example().train(total_steps=150_000, seed=seed)
    # A random policy averages ~22; CleanRL's PPO is near 500 by this budget.
    assert len(returns) > 100
    assert np.mean(returns[-20:]) >= 350, np.mean(returns[-20:])
