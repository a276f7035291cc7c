"""The package's public API: registration, Gymnasium's env checker and wrappers,
seeding and thread-count determinism, EnvPool's send/recv, caller-owned buffers, and
the exceptions bad input raises."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

import rlrig
from rlrig._spaces import gym_id

ALL_IDS = rlrig.env_ids()
# A package built with Atari (`--features atari`) lists every game; the tests that run
# each env take Pong's two ids of them (the ROMs scripts/fetch_roms.sh fetches).
ATARI = [k for k in ALL_IDS if k.endswith("-v5")]
IDS = [k for k in ALL_IDS if k not in ATARI] + [k for k in ATARI if "Pong" in k]


def test_every_env_is_registered_with_gymnasium():
    assert len(ALL_IDS) >= 14
    for k in ALL_IDS:
        spec = gym.spec(gym_id(k))
        assert spec.vector_entry_point is not None
        assert rlrig.native_id(gym_id(k)) == k


@pytest.mark.parametrize("env_id", IDS)
def test_gymnasium_env_checker_passes(env_id):
    env = gym.make(gym_id(env_id), render_mode="rgb_array")
    check_env(env.unwrapped)
    # And through make's wrappers (TimeLimit, order enforcing, passive checker).
    obs, _ = env.reset(seed=1)
    assert obs in env.observation_space
    for _ in range(5):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert obs in env.observation_space and isinstance(r, float)
    env.close()


@pytest.mark.parametrize("env_id", IDS)
def test_vector_env_outputs_have_gymnasium_dtypes_and_shapes(env_id):
    envs = rlrig.make_vec(env_id, 5, seed=0)
    obs, info = envs.reset(seed=2)
    assert info == {}
    dtype = np.uint8 if env_id in ATARI else np.float32
    assert envs.observation_space.dtype == dtype
    assert obs.dtype == dtype and obs in envs.observation_space
    envs.action_space.seed(0)
    obs, rew, term, trunc, info = envs.step(envs.action_space.sample())
    assert obs.shape == envs.observation_space.shape and obs.dtype == dtype
    assert rew.dtype == np.float64 and rew.shape == (5,)
    assert term.dtype == np.bool_ and trunc.dtype == np.bool_
    envs.close()
    assert envs.closed


@pytest.mark.parametrize("env_id", IDS)
def test_rgb_frames_are_drawn(env_id):
    env = gym.make(gym_id(env_id), render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert frame.shape[0] >= 300 and frame.shape[1] >= 300
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 1, "something is drawn"
    envs = rlrig.make_vec(env_id, 2, render_mode="rgb_array", seed=0)
    envs.reset()
    frames = envs.render()
    assert isinstance(frames, tuple) and len(frames) == 2 and frames[0].shape == frame.shape
    assert rlrig.make_vec(env_id, 2).render() is None
    with pytest.raises(ValueError, match="render_mode must be None or 'rgb_array'"):
        rlrig.make_vec(env_id, 2, render_mode="human")


def test_results_do_not_depend_on_the_thread_count():
    def run(threads):
        envs = rlrig.make_vec("CartPole-v1", 4096, num_threads=threads, seed=9)
        rng = np.random.default_rng(0)
        out = [envs.reset()[0]]
        for _ in range(60):
            o, r, t, u, _ = envs.step(rng.integers(0, 2, 4096))
            out += [o, r, t, u]
        return out

    one = run(1)
    for threads in (2, 7):
        for a, b in zip(one, run(threads)):
            np.testing.assert_array_equal(a, b)


def test_seeds_are_deterministic_and_a_seed_list_matches_single_envs():
    a = rlrig.make_vec("Pendulum-v1", 3, seed=1)
    b = rlrig.make_vec("Pendulum-v1", 3, seed=1)
    np.testing.assert_array_equal(a.reset(seed=4)[0], b.reset(seed=4)[0])
    assert not np.array_equal(a.reset(seed=4)[0], a.reset(seed=5)[0])
    seeds = [7, 8, 9]
    obs, _ = a.reset(seed=seeds)
    single = gym.make("rlrig/Pendulum-v1")
    for k, s in enumerate(seeds):
        np.testing.assert_array_equal(obs[k], single.reset(seed=s)[0])
    # None in the list leaves that env's stream where it was.
    obs2, _ = a.reset(seed=[None, 8, None])
    np.testing.assert_array_equal(obs2[1], obs[1])


def test_gymnasium_vector_wrappers_run_on_top():
    envs = gym.make_vec("rlrig/Pendulum-v1", num_envs=4, seed=0)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    envs = gym.wrappers.vector.NormalizeObservation(envs)
    envs = gym.wrappers.vector.ClipAction(envs)
    envs.reset(seed=0)
    episodes = 0
    for _ in range(210):
        # Out-of-range actions: ClipAction brings them into the Box.
        _, _, term, trunc, info = envs.step(np.full((4, 1), 5.0, dtype=np.float32))
        if "episode" in info:
            episodes += int(info["_episode"].sum())
            assert (info["episode"]["l"][info["_episode"]] == 200).all()
    assert episodes == 4


def test_step_into_fills_caller_buffers_in_place():
    envs = rlrig.make_vec("CartPole-v1", 8, seed=3)
    ref = rlrig.make_vec("CartPole-v1", 8, seed=3)
    envs.reset(seed=1)
    ref.reset(seed=1)
    obs = np.zeros((8, 4), np.float32)
    rew = np.zeros(8)
    term = np.zeros(8, bool)
    trunc = np.zeros(8, bool)
    ids = [id(x) for x in (obs, rew, term, trunc)]
    for _ in range(30):
        a = np.ones(8, dtype=np.int64)
        envs.step_into(a, obs, rew, term, trunc)
        o, r, t, u, _ = ref.step(a)
        for mine, theirs in zip((obs, rew, term, trunc), (o, r, t, u)):
            np.testing.assert_array_equal(mine, theirs)
    assert ids == [id(x) for x in (obs, rew, term, trunc)]
    with pytest.raises(TypeError, match="obs must be a numpy array of dtype float32"):
        envs.step_into(a, np.zeros((8, 4)), rew, term, trunc)
    with pytest.raises(ValueError, match="holds 4 values"):
        envs.step_into(a, obs, np.zeros(4), term, trunc)


def test_envpool_send_recv_follows_each_envs_own_trajectory():
    n, batch = 16, 4
    pool = rlrig.make_async("CartPole-v1", n, batch, num_threads=2, seed=5)
    sync = rlrig.make_vec("CartPole-v1", n, num_threads=1, seed=5)
    want = sync.reset()[0]
    pool.async_reset()
    got = {}
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, (40, n))
    step_of = np.zeros(n, dtype=int)
    trajectories = {k: [] for k in range(n)}
    for _ in range(n // batch):
        obs, rew, term, trunc, info = pool.recv()
        for row, k in enumerate(info["env_id"]):
            got[int(k)] = obs[row]
    for k in range(n):
        np.testing.assert_array_equal(got[k], want[k])
    # Every env takes its own 40 actions, in whatever batches they come back.
    for k in range(n):
        pool.send(np.array([actions[0, k]]), np.array([k]))
    remaining = 40 * n
    while remaining:
        obs, rew, term, trunc, info = pool.recv()
        remaining -= len(obs)
        for row, k in enumerate(info["env_id"]):
            k = int(k)
            trajectories[k].append((obs[row].copy(), rew[row], term[row], trunc[row]))
            step_of[k] += 1
            if step_of[k] < 40:
                pool.send(np.array([actions[step_of[k], k]]), np.array([k]))
    for t in range(40):
        o, r, te, tr, _ = sync.step(actions[t])
        for k in range(n):
            mo, mr, mte, mtr = trajectories[k][t]
            np.testing.assert_array_equal(mo, o[k])
            assert (mr, mte, mtr) == (r[k], te[k], tr[k])
    pool.close()


def test_envpool_sync_step():
    pool = rlrig.make_async("rlrig/MountainCar-v0", 4)
    obs, info = pool.reset()
    assert obs.shape == (4, 2) and list(info["env_id"]) == [0, 1, 2, 3]
    obs, rew, term, trunc, info = pool.step(np.zeros(4, dtype=np.int64))
    assert (rew == -1).all() and sorted(info["env_id"]) == [0, 1, 2, 3]


# Bad input: an exception naming what and where, never a crash.

def test_wrong_action_shape_and_dtype():
    envs = rlrig.make_vec("CartPole-v1", 4, seed=0)
    envs.reset()
    with pytest.raises(ValueError, match=r"CartPole-v1: actions must have shape \(4,\).*\(3,\)"):
        envs.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(TypeError, match="must be integers, got an array of dtype float64"):
        envs.step(np.zeros(4))
    with pytest.raises(TypeError, match="dtype <U1"):
        envs.step(np.array(["a"] * 4))
    cont = rlrig.make_vec("Pendulum-v1", 2, seed=0)
    with pytest.raises(ValueError, match=r"shape \(2, 1\)"):
        cont.step(np.zeros(2, dtype=np.float32))


def test_out_of_range_and_nan_actions_name_env_and_index():
    envs = rlrig.make_vec("CartPole-v1", 4, seed=0)
    envs.reset()
    with pytest.raises(ValueError, match=r"action for env 2 is 7, outside Discrete\(2\)"):
        envs.step(np.array([0, 1, 7, 0]))
    with pytest.raises(ValueError, match="action for env 1 is -1"):
        envs.step(np.array([0, -1, 0, 0], dtype=np.int32))
    with pytest.raises(ValueError, match="is 9223372036854775807"):
        envs.step(np.array([0, 0, 0, 2**63 - 1]))
    cont = rlrig.make_vec("MountainCarContinuous-v0", 3, seed=0)
    cont.reset()
    with pytest.raises(ValueError, match="action for env 2, component 0, is NaN"):
        cont.step(np.array([[0.0], [0.1], [np.nan]], dtype=np.float32))
    # Nothing moved: the next good step goes on from the same state.
    before = cont.get_state(0)
    cont.step(np.zeros((3, 1), np.float32))
    assert cont.get_state(0) != before


def test_unknown_ids_and_env_args():
    with pytest.raises(ValueError, match="unknown env id 'cartpole-v1'.*did you mean 'CartPole-v1'"):
        rlrig.make_vec("cartpole-v1", 2)
    with pytest.raises(ValueError, match="Pendulum-v1: parameter gravity=9"):
        rlrig.make_vec("Pendulum-v1", 2, gravity=9)
    with pytest.raises(ValueError, match="parameter g=heavy"):
        rlrig.make_vec("Pendulum-v1", 2, g="heavy")
    with pytest.raises(ValueError, match="sticky_action_prob=2: '2' is not a probability"):
        rlrig.make_vec("MinAtar/Breakout-v1", 2, sticky_action_prob=2)
    with pytest.raises(ValueError, match="MinAtar/Freeway-v1: parameter speed=3: unknown parameter"):
        rlrig.make_vec("MinAtar/Freeway-v1", 2, speed=3)
    envs = gym.make_vec("rlrig/Pendulum-v1", num_envs=2, g=3.5)
    assert envs.num_envs == 2
    with pytest.raises(ValueError, match="num_envs must be a positive integer"):
        rlrig.make_vec("CartPole-v1", 0)
    with pytest.raises(ValueError, match="time limit is 1000 steps"):
        rlrig.make_vec("LunarLander-v3", 2, max_episode_steps=50)


def test_time_limits_follow_gymnasium_make_vec():
    envs = gym.make_vec("rlrig/CartPole-v1", num_envs=2, max_episode_steps=7)
    envs.reset(seed=0)
    # A policy that balances for a few steps: truncated at 7 unless it fell.
    for t in range(7):
        _, _, term, trunc, _ = envs.step(np.array([t % 2, (t + 1) % 2]))
    assert (term | trunc).all()
    minatar = rlrig.make_vec("MinAtar/Freeway-v1", 2, max_episode_steps=3, seed=0)
    minatar.reset()
    for _ in range(3):
        _, _, term, trunc, _ = minatar.step(np.zeros(2, dtype=np.int64))
    assert trunc.all()


def test_gym_make_time_limits_are_gymnasiums():
    def episode_length(env):
        obs, _ = env.reset(seed=0)
        for t in range(1, 2000):
            x, x_dot, theta, theta_dot = obs
            a = int(theta + 0.5 * theta_dot + 0.01 * x + 0.05 * x_dot > 0)  # balances
            obs, _, term, trunc, _ = env.step(a)
            if term or trunc:
                return t, term
        return None, False

    assert episode_length(gym.make("rlrig/CartPole-v1")) == (500, False)
    assert episode_length(gym.make("rlrig/CartPole-v1", max_episode_steps=40)) == (40, False)
    t, term = episode_length(gym.make("rlrig/CartPole-v1", max_episode_steps=1000))
    assert t != 500 and (term or t == 1000), (t, term)


def test_unseeded_single_envs_differ_and_seeded_ones_agree():
    a, b = gym.make("rlrig/CartPole-v1"), gym.make("rlrig/CartPole-v1")
    assert not np.array_equal(a.reset()[0], b.reset()[0])
    np.testing.assert_array_equal(a.reset(seed=3)[0], b.reset(seed=3)[0])
    obs, _ = gym.make_vec("rlrig/CartPole-v1", num_envs=3, vectorization_mode="sync").reset()
    assert not (obs == obs[0]).all(), "Gymnasium's SyncVectorEnv of unseeded copies"


def test_bad_seeds_and_single_env_action_shapes():
    with pytest.raises(ValueError, match=r"a seed must be in \[0, 2\*\*64\), got -1"):
        rlrig.make_vec("CartPole-v1", 2, seed=-1)
    envs = rlrig.make_vec("CartPole-v1", 2, seed=0)
    with pytest.raises(ValueError, match="got 18446744073709551616"):
        envs.reset(seed=2**64)
    with pytest.raises(ValueError, match="got -5"):
        envs.reset(seed=[1, -5])
    with pytest.raises(TypeError, match="must be an integer"):
        envs.reset(seed=[1, True])
    with pytest.raises(ValueError, match="got -1"):
        gym.make("rlrig/CartPole-v1").unwrapped.reset(seed=-1)
    env = gym.make("rlrig/Pendulum-v1").unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"an action must have shape \(1,\), got \(1, 1\)"):
        env.step(np.zeros((1, 1), np.float32))
    cp = gym.make("rlrig/CartPole-v1").unwrapped
    cp.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(\), got \(1,\)"):
        cp.step(np.array([1]))


def test_impossible_batch_sizes_are_refused_before_allocating():
    for n in (2**40, 2**62):
        with pytest.raises(MemoryError, match="num_envs"):
            rlrig.make_vec("CartPole-v1", n, seed=0)
        with pytest.raises(MemoryError, match="num_envs"):
            rlrig.make_async("CartPole-v1", n, 1)


def test_step_into_checks_every_output_before_stepping():
    envs = rlrig.make_vec("CartPole-v1", 2, seed=0)
    envs.reset()
    before = [envs.get_state(i) for i in range(2)]
    good = (np.zeros((2, 4), np.float32), np.zeros(2), np.zeros(2, bool), np.zeros(2, bool))
    a = np.ones(2, dtype=np.int64)
    for k, bad in [(0, np.zeros((2, 4))), (1, np.zeros(3)), (2, np.zeros(2, np.int8)),
                   (0, np.zeros((4, 2), np.float32).T)]:
        outs = list(good)
        outs[k] = bad
        with pytest.raises((TypeError, ValueError)):
            envs.step_into(a, *outs)
        assert [envs.get_state(i) for i in range(2)] == before, "nothing stepped"
    with pytest.raises(TypeError, match="dtype float32"):
        envs.step_into(a, np.zeros((2, 4)), *good[1:])


def test_closed_envs_raise():
    envs = rlrig.make_vec("CartPole-v1", 2)
    envs.close()
    with pytest.raises(RuntimeError, match="CartPole-v1: the env is closed"):
        envs.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(RuntimeError, match="closed"):
        envs.reset()


def test_bad_reset_masks_and_state_vectors():
    envs = rlrig.make_vec("CartPole-v1", 3, autoreset_mode=AutoresetMode.DISABLED)
    with pytest.raises(TypeError, match="reset_mask"):
        envs.reset(options={"reset_mask": [True, False, True]})
    with pytest.raises(ValueError, match=r"shape `\(3,\)`"):
        envs.reset(options={"reset_mask": np.ones(2, bool)})
    with pytest.raises(ValueError, match="at least one"):
        envs.reset(options={"reset_mask": np.zeros(3, bool)})
    with pytest.raises(ValueError, match="length must match"):
        envs.reset(seed=[1, 2])
    with pytest.raises(ValueError, match="CartPole-v1: bad state: env 1"):
        envs.set_state(1, [0.0, 0.0])
    with pytest.raises(ValueError, match="env index 5 out of range"):
        envs.get_state(5)


def test_envpool_errors():
    pool = rlrig.make_async("CartPole-v1", 4, 2)
    with pytest.raises(ValueError, match="would wait forever"):
        pool.recv()
    pool.async_reset()
    with pytest.raises(ValueError, match="env 0 is already in flight"):
        pool.send(np.zeros(1, dtype=np.int64), np.array([0]))
    with pytest.raises(ValueError, match="env ids must be in 0..4, got 9"):
        pool.send(np.zeros(1, dtype=np.int64), np.array([9]))
    with pytest.raises(ValueError, match="reset\\(\\) waits for all envs"):
        pool.reset()
    with pytest.raises(ValueError, match="lists env 1 more than once"):
        pool.send(np.zeros(2, dtype=np.int64), np.array([1, 1]))
    with pytest.raises(ValueError, match=r"one-dimensional, got shape \(1, 1\)"):
        pool.send(np.zeros(1, dtype=np.int64), np.array([[1]]))
    with pytest.raises(ValueError, match="reset\\(env_ids\\)"):
        rlrig.make_async("CartPole-v1", 2).reset(np.array([0]))
