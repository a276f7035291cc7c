"""The Python vector env replays the golden files (trajectories recorded from the
reference implementations by scripts/golden/, the files the Rust golden tests use):
each episode starts from the recorded initial state (`set_state`) and takes the
recorded actions; observations within the golden tolerance (1e-6 relative or 1e-9
absolute), rewards and flags exact. MinAtar Breakout against the `minatar` package
with sticky actions off, frames exact (the other games draw as they play; their
draws are fed back in the Rust tests)."""

import json
from pathlib import Path

import numpy as np
import pytest

import rlrig

GOLDEN = Path(__file__).resolve().parents[2] / "crates" / "rlrig-env" / "tests" / "golden"
CLASSIC = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"]


def episodes(name):
    doc = json.loads((GOLDEN / f"{name}.json").read_text())
    return doc, doc["episodes"]


def replay(envs, ep):
    envs.set_state(0, ep["state"])
    discrete = envs.single_action_space.shape == ()
    for t, (a, want) in enumerate(zip(ep["actions"], ep["steps"])):
        if discrete:
            act = np.array([int(a if np.isscalar(a) else a[0])], dtype=np.int64)
        else:
            # Decimal -> float64 -> float32, as the recorder did.
            act = np.array([a if isinstance(a, list) else [a]], dtype=np.float64).astype(np.float32)
        obs, rew, term, trunc, _ = envs.step(act)
        yield t, obs[0], float(rew[0]), bool(term[0]), bool(trunc[0]), want


@pytest.mark.parametrize("env_id", CLASSIC)
def test_classic_control_replays_the_gymnasium_golden_files(env_id):
    doc, eps = episodes(env_id)
    assert doc["env"] == env_id
    envs = rlrig.make_vec(env_id, 1, seed=0)
    envs.reset()
    for ep in eps:
        n = 0
        for t, obs, rew, term, trunc, want in replay(envs, ep):
            what = f"{env_id} seed {ep['seed']} step {t}"
            ref = np.asarray(want["obs"], dtype=np.float32).astype(np.float64)
            np.testing.assert_allclose(obs.astype(np.float64), ref, rtol=1e-6, atol=1e-9, err_msg=what)
            assert rew == want["reward"], what
            assert (term, trunc) == (want["terminated"], want["truncated"]), what
            n += 1
        assert n == len(ep["steps"]) and (term or trunc), f"{env_id}: the episode ends where recorded"
        envs.step(envs.action_space.sample())  # the next-step autoreset, before the next episode


def test_minatar_breakout_replays_the_minatar_golden_file():
    doc, eps = episodes("MinAtar-Breakout-v1")
    assert doc["sticky_action_prob"] == 0.0
    envs = rlrig.make_vec("MinAtar/Breakout-v1", 1, seed=0, sticky_action_prob=0.0)
    envs.reset()
    total = 0.0
    for ep in eps:
        for t, obs, rew, term, trunc, want in replay(envs, ep):
            what = f"Breakout seed {ep['seed']} step {t}"
            flat = obs.reshape(-1)
            assert list(np.flatnonzero(flat == 1.0)) == want["ones"], what
            assert set(np.unique(flat)) <= {0.0, 1.0}
            assert rew == want["reward"] and (term, trunc) == (want["terminated"], want["truncated"]), what
            total += rew
        envs.step(np.zeros(1, dtype=np.int64))
    assert total >= 4, "the golden episodes break bricks"
