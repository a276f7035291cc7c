"""Training from Python and the policies it loads: `rlrig.train` runs the CLI's
driver in-process, `rlrig.load(run).act` takes exactly the actions `rlrig eval`
takes, Ctrl-C stops with a checkpoint, bad configs raise."""

import os
import signal
import threading

import numpy as np
import pytest

import rlrig


def greedy_returns_in_python(policy, episodes, seed):
    """`rlrig eval`'s loop, written against the Python API: one batch of `episodes`
    envs seeded `seed`, each episode's undiscounted return up to its first end."""
    envs = rlrig.make_vec(policy.env_id, episodes, seed=seed, num_threads=1, **policy.env_args)
    obs, _ = envs.reset()
    returns = np.zeros(episodes)
    finished = np.zeros(episodes, bool)
    while not finished.all():
        obs, r, term, trunc, _ = envs.step(policy.act(obs))
        returns += np.where(finished, 0.0, r)
        finished |= term | trunc
    return returns


@pytest.mark.parametrize(
    "algo,env,budget",
    [("ppo", "CartPole-v1", 20_000), ("dqn", "CartPole-v1", 3_000), ("td3", "Pendulum-v1", 1_200)],
)
def test_loaded_policy_acts_as_rlrig_eval(tmp_path, algo, env, budget):
    run = rlrig.train(algo, env, total_steps=budget, run_dir=tmp_path / "run", quiet=True,
                      eval_episodes=6)
    assert run["run_dir"] == str(tmp_path / "run")
    assert run["metrics"]["global_step"] > 0
    ev = run["eval"]
    policy = rlrig.load(run["run_dir"])
    assert policy.env_id == env
    returns = greedy_returns_in_python(policy, ev["episodes"], ev["seed"])
    assert returns.mean() == pytest.approx(ev["mean_return"], rel=0, abs=1e-9)
    assert (returns.min(), returns.max()) == (ev["min_return"], ev["max_return"])
    one = policy.act(np.zeros(policy.observation_space.shape, np.float32))
    assert one in policy.action_space
    # A policy loaded on one thread acts on another (data loaders, servers).
    obs = np.random.default_rng(0).uniform(-1, 1, (8, *policy.observation_space.shape)).astype(np.float32)
    got = {}
    th = threading.Thread(target=lambda: got.setdefault("actions", policy.act(obs)))
    th.start()
    th.join()
    np.testing.assert_array_equal(got["actions"], policy.act(obs))


def test_bad_configs_and_observations_raise(tmp_path):
    with pytest.raises(ValueError, match="unknown key 'bogus'"):
        rlrig.train("ppo", "CartPole-v1", bogus=3, run_dir=tmp_path / "a")
    with pytest.raises(ValueError, match="unknown env id"):
        rlrig.train("ppo", "CartPol-v1", run_dir=tmp_path / "b")
    with pytest.raises(ValueError, match="invalid value '-3' for '--total-steps"):
        rlrig.train("ppo", "CartPole-v1", total_steps=-3, run_dir=tmp_path / "c")
    with pytest.raises(ValueError, match="nothing: no such run directory"):
        rlrig.load(tmp_path / "nothing")
    run = rlrig.train("ppo", "CartPole-v1", total_steps=2048, run_dir=tmp_path / "d", quiet=True)
    policy = rlrig.load(run["run_dir"])
    with pytest.raises(ValueError, match=r"CartPole-v1: observations must have shape \(n, 4\)"):
        policy.act(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="NaN"):
        policy.act(np.full((1, 4), np.nan, np.float32))
    with pytest.raises(ValueError, match="greedy"):
        policy.act(np.zeros((1, 4), np.float32), deterministic=False)


def test_quiet_runs_print_nothing_and_loud_ones_their_report(tmp_path, capfd):
    # capfd reads file descriptor 1, where the Rust side writes.
    rlrig.train("ppo", "CartPole-v1", total_steps=1024, run_dir=tmp_path / "q", quiet=True,
                eval_episodes=1)
    out = capfd.readouterr().out
    assert out == "", out
    rlrig.train("ppo", "CartPole-v1", total_steps=1024, run_dir=tmp_path / "l", eval_episodes=1)
    out = capfd.readouterr().out
    assert "run directory: " + str(tmp_path / "l") in out, out


def test_one_embedded_run_at_a_time(tmp_path):
    first = tmp_path / "first"
    done = {}
    th = threading.Thread(target=lambda: done.setdefault("r", rlrig.train(
        "ppo", "CartPole-v1", total_steps=1_000_000, run_dir=first, quiet=True, eval_episodes=1)))
    th.start()
    try:
        # The first run has started once its config is written; it then trains for seconds.
        while th.is_alive() and not (first / "config.toml").exists():
            th.join(0.01)
        if th.is_alive():
            with pytest.raises(ValueError, match="another rlrig train is running in this process"):
                rlrig.train("ppo", "CartPole-v1", total_steps=2048, run_dir=tmp_path / "second")
    finally:
        th.join()
    assert done["r"]["run_dir"] == str(first)
    # Afterwards a new run starts normally.
    assert rlrig.train("ppo", "CartPole-v1", total_steps=2048, run_dir=tmp_path / "third",
                       quiet=True, eval_episodes=1)["run_dir"] == str(tmp_path / "third")


def interrupted(after_s, **kwargs):
    """`rlrig.train(**kwargs)` with a Ctrl-C (SIGINT to this process) after `after_s`.

    Python's own SIGINT handler is installed for the call: a process started in the
    background by a non-interactive shell (as CI may start the suite) inherits SIGINT
    ignored, and Python then never installs its handler."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(after_s, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            rlrig.train(**kwargs)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)


def last_step(run_dir):
    lines = (run_dir / "metrics.csv").read_text().splitlines()
    return int(lines[-1].split(",")[1])


def test_ctrl_c_stops_with_a_checkpoint_and_resume_continues(tmp_path):
    run_dir = tmp_path / "run"
    # 200M steps: far more than the seconds before the Ctrl-C can train.
    interrupted(1.0, algo="ppo", env="CartPole-v1", total_steps=200_000_000, run_dir=run_dir, quiet=True)
    assert any((run_dir / "checkpoints").iterdir()), "a checkpoint was written"
    first = last_step(run_dir)
    assert first > 0
    # Resuming takes the run's own config and continues from the checkpoint.
    interrupted(1.0, algo="ppo", run_dir=run_dir, resume=True, quiet=True)
    assert last_step(run_dir) > first
