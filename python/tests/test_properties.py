"""Property tests of the public API: whatever array a caller passes, `step` either
steps (when the input is valid) or raises ValueError/TypeError and moves nothing;
never another exception, a crash or a silent acceptance of an invalid action."""

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import rlrig

DTYPES = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64,
                          np.float16, np.float32, np.float64, np.bool_, np.complex64])
SHAPES = st.sampled_from([(4,), (3,), (4, 1), (4, 2), (), (2, 2), (0,)])
N = 4
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def valid_discrete(a):
    """A Discrete(3) batch: N integers in 0..3."""
    return (a.dtype.kind in "iu" and a.shape == (N,)
            and bool(np.all((a.astype(np.float64) >= 0) & (a.astype(np.float64) < 3))))


def valid_box(a):
    """A Box((1,)) batch: N x 1 finite reals (out-of-bounds values are clipped)."""
    return (a.dtype.kind in "fiu" and a.shape == (N, 1)
            and bool(np.all(np.isfinite(a.astype(np.float64)))))


CASES = {
    "Acrobot-v1": (SHAPES, valid_discrete),
    "Pendulum-v1": (st.sampled_from([(N, 1), (N,), (N, 2), (1, N), ()]), valid_box),
}


@pytest.mark.parametrize("env_id", sorted(CASES))
@SETTINGS
@given(data=st.data())
def test_step_accepts_exactly_the_valid_actions(env_id, data):
    shapes, valid = CASES[env_id]
    a = data.draw(hnp.arrays(data.draw(DTYPES), data.draw(shapes)))
    envs = rlrig.make_vec(env_id, N, seed=0, num_threads=1)
    envs.reset()
    before = [envs.get_state(i) for i in range(N)]
    if valid(a):
        envs.step(a)
    else:
        with pytest.raises((ValueError, TypeError)):
            envs.step(a)
        assert [envs.get_state(i) for i in range(N)] == before, "a failed step moved nothing"


@SETTINGS
@given(seed=st.integers(0, 2**64 - 1), mask=hnp.arrays(np.bool_, (N,)),
       seeds=st.lists(st.one_of(st.none(), st.integers(0, 2**64 - 1)), min_size=N, max_size=N))
def test_resets_with_any_seed_and_mask_are_deterministic(seed, mask, seeds):
    a = rlrig.make_vec("CartPole-v1", N, seed=1)
    b = rlrig.make_vec("CartPole-v1", N, seed=1)
    np.testing.assert_array_equal(a.reset(seed=seed)[0], b.reset(seed=seed)[0])
    np.testing.assert_array_equal(a.reset(seed=seeds)[0], b.reset(seed=seeds)[0])
    if mask.any():
        np.testing.assert_array_equal(a.reset(options={"reset_mask": mask})[0],
                                      b.reset(options={"reset_mask": mask})[0])


def test_threads_step_their_own_envs_concurrently():
    """The GIL is released while stepping: envs used from several Python threads at
    once neither crash nor deadlock, and each gives what it gives alone."""
    def run(seed, out):
        envs = rlrig.make_vec("CartPole-v1", 1024, seed=seed, num_threads=1)
        obs, _ = envs.reset()
        acc = np.zeros_like(obs)
        for t in range(200):
            obs, *_ = envs.step(np.full(1024, t % 2, dtype=np.int64))
            acc += obs
        out[seed] = acc

    alone, together = {}, {}
    for s in range(4):
        run(s, alone)
    threads = [threading.Thread(target=run, args=(s, together)) for s in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
        assert not th.is_alive()
    for s in range(4):
        np.testing.assert_array_equal(alone[s], together[s])


def test_one_env_from_two_threads_is_an_error_not_a_crash():
    envs = rlrig.make_vec("CartPole-v1", 65536, seed=0, num_threads=1)
    envs.reset()
    errors = []

    def hammer():
        for _ in range(30):
            try:
                envs.step(np.zeros(65536, dtype=np.int64))
            except RuntimeError as e:  # pyo3: "Already borrowed"
                errors.append(str(e))

    threads = [threading.Thread(target=hammer) for _ in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert all("borrow" in e.lower() for e in errors), errors[:3]
