#!/usr/bin/env python3
"""Reference data for rlrig's Box2D envs (LunarLander-v3, LunarLanderContinuous-v3,
BipedalWalker-v3, BipedalWalkerHardcore-v3).

Usage:  python3 scripts/golden/make_golden_box2d.py [--walker] [OUT_DIR]
Needs:  pip install "gymnasium>=1.4,<1.5" numpy box2d pygame   (not needed by CI: the output is committed)

rlrig runs these envs on Box2D 2.3, Gymnasium's engine, so it is compared step by step:

1. trajectories: whole episodes from the first reset after `gym.make` (a fresh Box2D world on
   both sides), with every random number the reference draws captured by wrapping `np_random`
   (terrain and initial force at reset, the lander's two engine dispersions per step), the
   actions (random, Gymnasium's heuristics, and for the walker an open-loop gait), and every
   step's observation (float32), reward and termination flag. The walker's episodes are cut
   at WALKER_STEPS steps and its observations at WALKER_OBS steps to keep the file small.
   rlrig replays the same draws and actions (`crates/rlrig-env/tests/box2d_golden.rs`).
2. statistics: mean and standard deviation of return and episode length over 1,000 episodes
   of the uniform random policy and 200 of Gymnasium's heuristics (and the gait for the
   walker); rlrig's runs of the same policies must agree within sampling error.
"""

import json
import os
import sys

import Box2D
import gymnasium as gym
import numpy as np
from gymnasium.envs.box2d.bipedal_walker import BipedalWalkerHeuristics
from gymnasium.envs.box2d.lunar_lander import heuristic

_ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
OUT = _ARGS[0] if _ARGS else os.path.join(
    os.path.dirname(__file__), "..", "..", "crates", "rlrig-env", "tests", "golden")


class Recorder:
    """Wraps a numpy Generator and logs what `uniform`, `integers` and `random` return."""

    def __init__(self, gen):
        self.gen = gen
        self.log = []

    def uniform(self, *args, **kwargs):
        x = self.gen.uniform(*args, **kwargs)
        self.log.extend(np.atleast_1d(np.asarray(x, dtype=np.float64)).tolist())
        return x

    def integers(self, *args, **kwargs):
        x = self.gen.integers(*args, **kwargs)
        self.log.extend(float(v) for v in np.atleast_1d(x))
        return x

    def random(self, *args, **kwargs):
        x = self.gen.random(*args, **kwargs)
        self.log.extend(np.atleast_1d(np.asarray(x, dtype=np.float64)).tolist())
        return x

    def __getattr__(self, name):
        return getattr(self.gen, name)


def f32(x):
    return float(str(np.float32(x)))


def recorded_env(env_id, seed):
    """A fresh env whose first reset draws from a recording generator seeded with `seed`."""
    env = gym.make(env_id)
    rec = Recorder(np.random.default_rng(seed))
    env.unwrapped._np_random = rec
    return env, rec


def f32s(xs):
    return [f32(x) for x in xs]


def trajectory(env_id, seed, policy):
    """A whole episode: the reset's draws and observation, then per step the action, the two
    dispersion draws, the observation and the reward (to 1e-6), and the last flag."""
    env, rec = recorded_env(env_id, seed)
    obs, _ = env.reset()
    # 12 heights, 2 force components, then the reset's no-op step's two dispersions.
    draws = rec.log[:14]
    rec.log.clear()
    act_rng = np.random.default_rng(seed)
    out = {"seed": seed, "draws": draws, "obs0": f32s(obs), "actions": [], "dispersions": [],
           "obs": [], "rewards": []}
    while True:
        a = policy(env, obs, act_rng)
        obs, r, term, trunc, _ = env.step(a)
        out["actions"].append(a if isinstance(a, int) else [f32(x) for x in a])
        out["dispersions"].append(rec.log[-2:])
        rec.log.clear()
        out["obs"].append(f32s(obs))
        out["rewards"].append(round(float(r), 6))
        if term or trunc:
            out["terminated"] = bool(term)
            break
    return out


def heuristic_policy(env, obs, rng):
    a = heuristic(env, obs)
    return int(a) if np.isscalar(a) else [float(x) for x in np.asarray(a, dtype=np.float32)]


def random_policy(env, obs, rng):
    if env.unwrapped.continuous:
        return [f32(x) for x in rng.uniform(-1, 1, 2)]
    return int(rng.integers(4))


def episode(env, seed, act):
    """One episode from `env.reset(seed=seed)` with `act(obs, t)`: (return, length)."""
    obs, _ = env.reset(seed=seed)
    total, n = 0.0, 0
    while True:
        obs, r, term, trunc, _ = env.step(act(obs, n))
        total += r
        n += 1
        if term or trunc:
            return total, n


def summary(results):
    """The returns and lengths of `results` ((return, length) pairs) as arrays, and the
    figures both env families record: their means and standard deviations."""
    rets, lens = np.array([r for r, _ in results]), np.array([n for _, n in results])
    return rets, lens, {"episodes": len(results), "mean_return": float(rets.mean()),
                        "std_return": float(rets.std()), "mean_length": float(lens.mean()),
                        "std_length": float(lens.std())}


def statistics(env_id, policy, episodes):
    env = gym.make(env_id)
    act_rng = np.random.default_rng(12345)
    rets, _, st = summary([episode(env, 10_000 + ep, lambda obs, t: policy(env, obs, act_rng))
                           for ep in range(episodes)])
    return {**st, "solved_share": float((rets > 200).mean())}


def gait(t):
    """An open-loop walking pattern (the same in tests/box2d_golden.rs)."""
    x = np.float32(t) * np.float32(0.15)
    return np.array([np.sin(x), np.cos(x + 1), np.sin(x + 3), np.cos(x)], dtype=np.float32)


CLOUD_DRAWS = 10 * (1 + 5 * 2)  # _generate_clouds: rlrig draws no clouds


WALKER_STEPS = 300
WALKER_OBS = 100


def walker_trajectory(env_id, seed, policy):
    """One episode from the first reset (cut at WALKER_STEPS): the reset's draws, the terrain,
    and per step the action, reward and flag, with observations for the first WALKER_OBS."""
    env, rec = recorded_env(env_id, seed)
    obs, _ = env.reset()
    # terrain draws, the clouds' draws, then the push: rlrig takes terrain + push.
    draws = rec.log[:-(CLOUD_DRAWS + 1)] + rec.log[-1:]
    u = env.unwrapped
    obstacles = [b for b in u.terrain if isinstance(b.fixtures[0].shape, Box2D.b2PolygonShape)]
    act_rng = np.random.default_rng(seed)
    h = BipedalWalkerHeuristics()
    out = {"seed": seed, "draws": draws, "terrain_y": [float(y) for y in u.terrain_y],
           "obstacles": len(obstacles), "obs0": f32s(obs), "actions": [], "obs": [],
           "rewards": [], "terminated": False}
    for t in range(WALKER_STEPS):
        a = h.step_heuristic(obs) if policy == "heuristic" else policy(t, act_rng)
        a = np.asarray(a, dtype=np.float32)
        obs, r, term, trunc, _ = env.step(a)
        out["actions"].append(f32s(a))
        out["rewards"].append(round(float(r), 6))
        if t < WALKER_OBS:
            out["obs"].append(f32s(obs))
        if term or trunc:
            out["terminated"] = bool(term)
            break
    return out


def walker_random(t, rng):
    return np.array([f32(x) for x in rng.uniform(-1, 1, 4)], dtype=np.float32)


def walker_gait(t, rng):
    return gait(t)


def walker_statistics(env_id, policy, episodes):
    """`policy(t, rng)`, or with `policy == "heuristic"` Gymnasium's stateful
    BipedalWalkerHeuristics, fresh per episode and fed every observation from the reset's on."""
    act_rng = np.random.default_rng(12345)
    results = []
    for ep in range(episodes):
        # A fresh env per episode: Gymnasium's walker keeps its Box2D world across resets,
        # and a reused world orders its contacts differently (see rlrig's envs/b2.rs); rlrig
        # builds a new world per episode, so the first episode after `make` is compared.
        h = BipedalWalkerHeuristics()

        def act(obs, t):
            return h.step_heuristic(obs) if policy == "heuristic" else policy(t, act_rng)

        results.append(episode(gym.make(env_id), 20_000 + ep, act))
    _, lens, st = summary(results)
    return {**st, "terminated_early_share": float((lens < (1600 if "Hardcore" not in env_id else 2000)).mean())}


def write(data, name):
    """Writes `data` to OUT/name and prints its size and statistics."""
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        json.dump(data, f, separators=(",", ":"))
    print(path, os.path.getsize(path), "bytes")
    for env_id, st in data["statistics"].items():
        for pol, s in st.items():
            print(env_id, pol, {k: round(v, 2) for k, v in s.items()})


def walker_main():
    data = {"gymnasium": gym.__version__, "trajectories": {}, "statistics": {}}
    for env_id in ["BipedalWalker-v3", "BipedalWalkerHardcore-v3"]:
        episodes = [(1, walker_random), (3, walker_gait), (4, "heuristic")]
        if "Hardcore" in env_id:
            episodes = [(1, walker_random), (4, "heuristic"), (5, "heuristic")]
        data["trajectories"][env_id] = [walker_trajectory(env_id, s, pol) for s, pol in episodes]
        data["statistics"][env_id] = {
            "random": walker_statistics(env_id, walker_random, 1000),
            "gait": walker_statistics(env_id, walker_gait, 100),
            "heuristic": walker_statistics(env_id, "heuristic", 100),
        }
    write(data, "BipedalWalker-v3.json")


def main():
    os.makedirs(OUT, exist_ok=True)
    data = {"gymnasium": gym.__version__, "trajectories": {}, "statistics": {}}
    for env_id in ["LunarLander-v3", "LunarLanderContinuous-v3"]:
        data["trajectories"][env_id] = [
            trajectory(env_id, s, pol)
            for s, pol in [(1, random_policy), (2, random_policy), (3, heuristic_policy),
                           (4, heuristic_policy)]
        ]
        data["statistics"][env_id] = {
            "random": statistics(env_id, random_policy, 1000),
            "heuristic": statistics(env_id, heuristic_policy, 200),
        }
    write(data, "LunarLander-v3.json")


if __name__ == "__main__":
    if "--walker" in sys.argv:
        sys.argv.remove("--walker")
        walker_main()
    else:
        main()
