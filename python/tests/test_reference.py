"""rlrig's vector envs against Gymnasium's own `SyncVectorEnv` of the reference envs,
step for step, in each autoreset mode.

Both sides start every episode from the reference's initial state (read from
`env.unwrapped.state` after Gymnasium resets, written into rlrig with `set_state`),
take the same random actions, and must agree: observations bit for bit (rlrig's
classic control is Gymnasium's arithmetic; Acrobot within 1e-4: NumPy's sin/cos may
differ from libm's in the last bit on some CPUs and the double pendulum is chaotic,
which scripts/acrobot_ulp_divergence.py measures at up to 1e-4 over an episode),
rewards and flags exactly, the autoreset
step (reward 0, flags false) and same-step infos (`final_obs` and masks) too."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import rlrig

CLASSIC = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"]
N = 6


def pair(env_id, mode, seed):
    ref = gym.make_vec(env_id, num_envs=N, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": mode})
    ours = gym.make_vec(f"rlrig/{env_id}", num_envs=N, autoreset_mode=mode, num_threads=2)
    assert ours.single_observation_space == ref.single_observation_space
    assert ours.single_action_space == ref.single_action_space
    assert ours.observation_space == ref.observation_space
    assert ours.action_space == ref.action_space
    assert ours.metadata["autoreset_mode"] == mode
    ref_obs, _ = ref.reset(seed=seed)
    ours.reset(seed=seed)
    ours_obs = sync_states(ref, ours, range(N))
    np.testing.assert_array_equal(ours_obs, ref_obs)
    return ref, ours


def sync_states(ref, ours, envs, obs=None):
    """Puts rlrig's envs `envs` into the reference envs' states; returns rlrig's
    observations, those rows replaced in `obs` (a step's output) when given."""
    obs = np.zeros((N, *ours.single_observation_space.shape), np.float32) if obs is None else obs.copy()
    for i in envs:
        obs[i] = ours.set_state(i, np.asarray(ref.envs[i].unwrapped.state, dtype=np.float64).ravel())
    return obs


def random_actions(space, rng):
    if isinstance(space, gym.spaces.MultiDiscrete):
        return rng.integers(0, space.nvec, dtype=np.int64)
    return rng.uniform(space.low, space.high).astype(np.float32)


def assert_same(a, b, what):
    assert a.dtype == b.dtype, f"{what}: dtype {a.dtype} vs reference {b.dtype}"
    if "Acrobot" in what and a.dtype == np.float32:
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=what)
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


@pytest.mark.parametrize("env_id", CLASSIC)
def test_next_step_autoreset_matches_gymnasium(env_id):
    ref, ours = pair(env_id, AutoresetMode.NEXT_STEP, seed=11)
    rng = np.random.default_rng(0)
    resets = ends = 0
    for t in range(1100):
        a = random_actions(ref.action_space, rng)
        pending = ref._autoreset_envs.copy()
        r = ref.step(a)
        o = ours.step(a)
        for k, what in zip(range(1, 4), ("rewards", "terminated", "truncated")):
            assert_same(o[k], r[k], f"{env_id} step {t}: {what}")
        assert o[4] == {} and r[4] == {}
        if pending.any():
            # The reset step: both reset the envs that ended, from different random
            # draws; rlrig continues from the reference's new states.
            resets += int(pending.sum())
            assert not o[1][pending].any() and not (o[2] | o[3])[pending].any()
            synced = sync_states(ref, ours, np.flatnonzero(pending), o[0])
            assert_same(synced, r[0], f"{env_id} step {t}: obs after reset")
        else:
            assert_same(o[0], r[0], f"{env_id} step {t}: obs")
        ends += int((r[2] | r[3]).sum())
    assert ends > 0 and resets > 0, "the run must cover episode ends and autoresets"


@pytest.mark.parametrize("env_id", CLASSIC)
def test_same_step_autoreset_matches_gymnasium(env_id):
    ref, ours = pair(env_id, AutoresetMode.SAME_STEP, seed=5)
    rng = np.random.default_rng(1)
    ends = 0
    for t in range(1100):
        a = random_actions(ref.action_space, rng)
        r = ref.step(a)
        o = ours.step(a)
        for k, what in zip(range(1, 4), ("rewards", "terminated", "truncated")):
            assert_same(o[k], r[k], f"{env_id} step {t}: {what}")
        done = r[2] | r[3]
        if done.any():
            ends += int(done.sum())
            ri, oi = r[4], o[4]
            assert sorted(oi) == sorted(ri) == ["_final_info", "_final_obs", "final_info", "final_obs"]
            assert_same(oi["_final_obs"], ri["_final_obs"], "final_obs mask")
            assert_same(oi["_final_info"], ri["_final_info"], "final_info mask")
            assert oi["final_info"] == ri["final_info"]
            assert oi["final_obs"].dtype == object and oi["final_obs"].shape == (N,)
            for i in range(N):
                if done[i]:
                    assert_same(oi["final_obs"][i], ri["final_obs"][i], f"{env_id} step {t} env {i}: final_obs")
                else:
                    assert oi["final_obs"][i] is None and ri["final_obs"][i] is None
            synced = sync_states(ref, ours, np.flatnonzero(done), o[0])
            assert_same(synced, r[0], f"{env_id} step {t}: obs after reset")
        else:
            assert o[4] == r[4] == {}
            assert_same(o[0], r[0], f"{env_id} step {t}: obs")
    assert ends > 0


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_disabled_autoreset_with_reset_mask_matches_gymnasium(env_id):
    ref, ours = pair(env_id, AutoresetMode.DISABLED, seed=3)
    rng = np.random.default_rng(2)
    for t in range(500):
        a = random_actions(ref.action_space, rng)
        r = ref.step(a)
        o = ours.step(a)
        for k in range(4):
            assert_same(o[k], r[k], f"{env_id} step {t}: output {k}")
        done = r[2] | r[3]
        if done.any():
            # Stepping an ended env without resetting it is an error (Gymnasium asserts,
            # after stepping the envs before it; rlrig moves nothing).
            with pytest.raises(ValueError, match="autoreset is disabled"):
                ours.step(a)
            ref_obs, _ = ref.reset(options={"reset_mask": done})
            ours_obs, _ = ours.reset(options={"reset_mask": done})
            # Untouched envs keep their observation; reset ones start from the reference.
            assert_same(ours_obs[~done], ref_obs[~done], f"{env_id}: obs of envs not reset")
            synced = sync_states(ref, ours, np.flatnonzero(done), ours_obs)
            assert_same(synced, ref_obs, f"{env_id}: obs after masked reset")
