"""Atari from Python (a package built with `--features atari`): Gymnasium's uint8
observations, caller-owned uint8 buffers, determinism over threads, the async pool, and
a missing ROM as an error that says where rlrig looked. Skipped when the package was
built without Atari. The frames themselves are checked against ale-py and Gymnasium's
wrappers step by step in crates/rlrig-env/tests/atari_golden.rs."""

import gymnasium as gym
import numpy as np
import pytest

import rlrig
from rlrig._spaces import gym_id

from test_export import numpy_actions

pytestmark = pytest.mark.skipif(
    "Pong-v5" not in rlrig.env_ids(), reason="the package was built without Atari"
)


def test_preprocessed_pong_gives_gymnasiums_uint8_stacks():
    envs = rlrig.make_vec("Pong-v5", 3, seed=1)
    space = envs.single_observation_space
    assert isinstance(space, gym.spaces.Box)
    assert space.dtype == np.uint8 and space.shape == (4, 84, 84)
    assert repr(space) == "Box(0, 255, (4, 84, 84), uint8)"
    obs, _ = envs.reset(seed=1)
    assert obs.dtype == np.uint8 and obs.shape == (3, 4, 84, 84)
    for _ in range(20):
        obs, rew, term, trunc, _ = envs.step(np.array([0, 2, 3]))
    assert obs.dtype == np.uint8 and obs in envs.observation_space
    assert obs.max() > obs.min(), "the screen is drawn"
    envs.close()


def test_raw_pong_gives_rgb_screens():
    env = gym.make(gym_id("ALE/Pong-v5"))
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.uint8 and obs.shape == (210, 160, 3)
    assert obs in env.observation_space
    env.close()


def test_step_into_fills_uint8_buffers_and_refuses_float32_ones():
    a = rlrig.make_vec("Pong-v5", 2, seed=4)
    b = rlrig.make_vec("Pong-v5", 2, seed=4)
    a.reset(seed=4)
    b.reset(seed=4)
    obs = np.zeros((2, 4, 84, 84), np.uint8)
    rew, term, trunc = np.zeros(2), np.zeros(2, bool), np.zeros(2, bool)
    for t in range(12):
        act = np.array([t % 6, (t + 3) % 6])
        a.step_into(act, obs, rew, term, trunc)
        want, want_rew, *_ = b.step(act)
        np.testing.assert_array_equal(obs, want)
        np.testing.assert_array_equal(rew, want_rew)
    wrong = np.zeros((2, 4, 84, 84), np.float32)
    before = obs.copy()
    with pytest.raises(TypeError, match="obs must be a numpy array of dtype uint8"):
        a.step_into(np.array([0, 0]), wrong, rew, term, trunc)
    # Nothing stepped: the next step still matches the twin's next step.
    a.step_into(np.array([1, 1]), obs, rew, term, trunc)
    np.testing.assert_array_equal(obs, b.step(np.array([1, 1]))[0])
    assert before.dtype == np.uint8


def test_pong_does_not_depend_on_the_thread_count():
    def run(threads):
        envs = rlrig.make_vec("Pong-v5", 4, num_threads=threads, seed=7)
        out = [envs.reset()[0]]
        rng = np.random.default_rng(0)
        for _ in range(30):
            out.append(envs.step(rng.integers(0, 6, size=4))[0])
        return np.stack(out)

    np.testing.assert_array_equal(run(1), run(2))


def test_the_async_pool_returns_uint8_observations():
    pool = rlrig.make_async("Pong-v5", 4, batch_size=2, seed=3)
    pool.async_reset()
    obs, rew, term, trunc, info = pool.recv()
    assert obs.dtype == np.uint8 and obs.shape == (2, 4, 84, 84)
    pool.send(np.zeros(2, np.int64), info["env_id"])
    obs, *_ = pool.recv()
    assert obs.dtype == np.uint8
    pool.close()


def test_a_missing_rom_names_the_file_and_where_rlrig_looked(tmp_path, monkeypatch):
    # No ROM in rom_dir, RLRIG_ROM_DIR or the cache (an installed ale-py would be asked
    # too; the test venv has none).
    monkeypatch.setenv("RLRIG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("RLRIG_ROM_DIR", raising=False)
    with pytest.raises(ValueError) as e:
        rlrig.make_vec("Pong-v5", 1, rom_dir=str(tmp_path))
    msg = str(e.value)
    assert "pong.bin" in msg and str(tmp_path) in msg and "fetch_roms.sh" in msg, msg


def test_an_atari_agent_trains_loads_acts_on_uint8_and_exports(tmp_path):
    # A few A2C updates of the Nature CNN on Breakout from Python, then the policy acts on
    # the env's uint8 stacks; the export (PyTorch's Conv2d layout, one trunk whose column 0
    # is the value) reproduces its actions in NumPy.
    run = rlrig.train("a2c", "Breakout-v5", total_steps=800, run_dir=tmp_path / "run",
                      quiet=True, eval_episodes=0)
    policy = rlrig.load(run["run_dir"])
    t, meta = policy.state_dict(), policy.metadata
    assert meta["action"] == "argmax(net(obs)[:, 1:], -1)" and meta["value"] == "net(obs)[:, 0]"
    assert t["net.0.weight"].shape == (32, 4, 8, 8)
    envs = rlrig.make_vec("Breakout-v5", 3, seed=2)
    obs, _ = envs.reset(seed=2)
    for _ in range(5):
        obs, *_ = envs.step(policy.act(obs))
    assert obs.dtype == np.uint8
    want = policy.act(obs)
    assert want.shape == (3,) and ((0 <= want) & (want < 4)).all()
    np.testing.assert_array_equal(policy.act(obs.astype(np.float32)), want)
    np.testing.assert_array_equal(numpy_actions(t, meta, obs.astype(np.float64)), want)
