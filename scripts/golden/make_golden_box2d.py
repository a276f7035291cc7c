#!/usr/bin/env python3
"""Reference data for rlrig's Box2D envs (LunarLander-v3, LunarLanderContinuous-v3,
BipedalWalker-v3, BipedalWalkerHardcore-v3).

Usage:  python3 scripts/golden/make_golden_box2d.py [--walker | --walker-pose] [OUT_DIR]
Needs:  pip install gymnasium numpy box2d pygame   (not needed by CI: the output is committed)

rlrig runs these envs on Box2D v3 (box2d-rust) while Gymnasium runs Box2D 2.3, so two kinds
of data are recorded:

1. trajectories: every random number the reference draws (terrain heights and initial force at
   reset, the two engine dispersions per step) is captured by wrapping `np_random`, together
   with the actions, observations, rewards and flags. For the walker, whose first steps are
   dominated by 2.3's position solver assembling the legs (see bipedal_walker.rs), the reset's
   draws and the terrain built from them (exact on both sides) instead. rlrig replays the same draws and actions and
   compares (`crates/rlrig-env/tests/box2d_golden.rs`), with tolerances that the solver
   difference justifies.
2. statistics: mean and standard deviation of return and episode length, and the share of
   episodes above 200 (the "solved" line), over 200 episodes of the uniform random policy and of
   Gymnasium's own `heuristic`, for both action spaces; for the walker, 100 episodes of the
   random policy and of an open-loop gait (`gait` below, the same on both sides). rlrig's runs of the same policies must
   agree within sampling error.
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


def trajectory(env_id, seed, policy, max_steps):
    env = gym.make(env_id)
    env.reset(seed=seed)
    rec = Recorder(env.unwrapped.np_random)
    env.unwrapped._np_random = rec
    obs, _ = env.reset()
    # 12 heights, 2 force components, then the reset's no-op step's two dispersions.
    draws = rec.log[:14]
    rec.log.clear()
    act_rng = np.random.default_rng(seed)
    steps = []
    for _ in range(max_steps):
        a = policy(env, obs, act_rng)
        obs, r, term, trunc, _ = env.step(a)
        disp = rec.log[-2:]
        rec.log.clear()
        steps.append({
            "action": a if isinstance(a, int) else [f32(x) for x in a],
            "dispersion": disp,
            "obs": [float(x) for x in obs],
            "reward": float(r),
            "terminated": bool(term),
        })
        if term or trunc:
            break
    return {"seed": seed, "draws": draws, "steps": steps}


def heuristic_policy(env, obs, rng):
    a = heuristic(env, obs)
    return int(a) if np.isscalar(a) else [float(x) for x in np.asarray(a, dtype=np.float32)]


def random_policy(env, obs, rng):
    if env.unwrapped.continuous:
        return [f32(x) for x in rng.uniform(-1, 1, 2)]
    return int(rng.integers(4))


def statistics(env_id, policy, episodes):
    env = gym.make(env_id)
    rets, lens = [], []
    act_rng = np.random.default_rng(12345)
    for ep in range(episodes):
        obs, _ = env.reset(seed=10_000 + ep)
        total, n = 0.0, 0
        while True:
            obs, r, term, trunc, _ = env.step(policy(env, obs, act_rng))
            total += r
            n += 1
            if term or trunc:
                break
        rets.append(total)
        lens.append(n)
    rets, lens = np.array(rets), np.array(lens)
    return {
        "episodes": episodes,
        "mean_return": float(rets.mean()),
        "std_return": float(rets.std()),
        "mean_length": float(lens.mean()),
        "std_length": float(lens.std()),
        "solved_share": float((rets > 200).mean()),
    }


def gait(t):
    """An open-loop walking pattern (the same in tests/box2d_golden.rs)."""
    x = np.float32(t) * np.float32(0.15)
    return np.array([np.sin(x), np.cos(x + 1), np.sin(x + 3), np.cos(x)], dtype=np.float32)


CLOUD_DRAWS = 10 * (1 + 5 * 2)  # _generate_clouds: rlrig draws no clouds


def walker_terrain(env_id, seed):
    """The reset's draws and the terrain the reference builds from them."""
    env = gym.make(env_id)
    env.reset(seed=seed)
    rec = Recorder(env.unwrapped.np_random)
    env.unwrapped._np_random = rec
    env.reset()
    # terrain draws, the clouds' draws, then the push: rlrig takes terrain + push.
    draws = rec.log[:-(CLOUD_DRAWS + 1)] + rec.log[-1:]
    u = env.unwrapped
    obstacles = [b for b in u.terrain if isinstance(b.fixtures[0].shape, Box2D.b2PolygonShape)]
    return {"seed": seed, "draws": draws, "terrain_y": [float(y) for y in u.terrain_y],
            "obstacles": len(obstacles)}


def walker_random(t, rng):
    return np.array([f32(x) for x in rng.uniform(-1, 1, 4)], dtype=np.float32)


def walker_gait(t, rng):
    return gait(t)


def walker_statistics(env_id, policy, episodes):
    """`policy(t, rng)`, or with `policy == "heuristic"` Gymnasium's stateful
    BipedalWalkerHeuristics, fresh per episode and fed every observation from the reset's on."""
    env = gym.make(env_id)
    rets, lens = [], []
    act_rng = np.random.default_rng(12345)
    for ep in range(episodes):
        obs, _ = env.reset(seed=20_000 + ep)
        h = BipedalWalkerHeuristics()
        total, n = 0.0, 0
        while True:
            a = h.step_heuristic(obs) if policy == "heuristic" else policy(n, act_rng)
            obs, r, term, trunc, _ = env.step(a)
            total += r
            n += 1
            if term or trunc:
                break
        rets.append(total)
        lens.append(n)
    rets, lens = np.array(rets), np.array(lens)
    return {"episodes": episodes, "mean_return": float(rets.mean()), "std_return": float(rets.std()),
            "mean_length": float(lens.mean()), "std_length": float(lens.std()),
            "terminated_early_share": float((lens < (1600 if "Hardcore" not in env_id else 2000)).mean())}


def walker_pose():
    """Prints the walker's pose after Gymnasium's reset and one step with zero action (by then
    Box2D 2.3's position solver has pulled the legs onto their joints), for pushes of 0 and
    +5 N: `REF_POSE` and `REF_POSE_PUSH` in crates/rlrig-env/src/envs/bipedal_walker.rs."""

    class Fixed:
        def __init__(self, gen, push):
            self.gen, self.push = gen, push

        def uniform(self, lo, hi, size=None):
            return self.push if lo == -5 else 0.0

        def integers(self, lo, hi, size=None):
            return lo

        def random(self, size=None):
            return 0.0

        def __getattr__(self, name):
            return getattr(self.gen, name)

    env = gym.make("BipedalWalker-v3").unwrapped
    init_x = 14 / 30 * 20 / 2
    for name, push in [("REF_POSE", 0.0), ("REF_POSE_PUSH", 5.0)]:
        env.reset(seed=0)
        env._np_random = Fixed(env.np_random, push)
        env.reset()
        env.step(np.zeros(4))
        print(f"const {name}: [[f64; 6]; 5] = [")
        for b in [env.hull] + env.legs:
            v = [b.position.x - init_x, b.position.y, b.angle, b.linearVelocity.x,
                 b.linearVelocity.y, b.angularVelocity]
            print("    [" + ", ".join(f"{x:.9}" for x in v) + "],")
        print("];")


def walker_main():
    data = {"gymnasium": gym.__version__, "terrains": {}, "statistics": {}}
    for env_id in ["BipedalWalker-v3", "BipedalWalkerHardcore-v3"]:
        data["terrains"][env_id] = [walker_terrain(env_id, s) for s in range(1, 7)]
        data["statistics"][env_id] = {
            "random": walker_statistics(env_id, walker_random, 100),
            "gait": walker_statistics(env_id, walker_gait, 100),
            "heuristic": walker_statistics(env_id, "heuristic", 100),
        }
    # Gymnasium's walker heuristic on one episode: its observations and actions, to check the
    # port action for action.
    env = gym.make("BipedalWalker-v3")
    obs, _ = env.reset(seed=20_000)
    h = BipedalWalkerHeuristics()
    rec = {"obs": [], "act": []}
    for _ in range(250):
        a = h.step_heuristic(obs)
        rec["obs"].append([f32(x) for x in obs])
        rec["act"].append([float(x) for x in a])
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    data["heuristic_actions"] = rec
    path = os.path.join(OUT, "BipedalWalker-v3.json")
    with open(path, "w") as f:
        json.dump(data, f, separators=(",", ":"))
    print(path, os.path.getsize(path), "bytes")
    for env_id, st in data["statistics"].items():
        for pol, s in st.items():
            print(env_id, pol, {k: round(v, 2) for k, v in s.items()})


def main():
    os.makedirs(OUT, exist_ok=True)
    data = {"gymnasium": gym.__version__, "trajectories": {}, "statistics": {}}
    for env_id in ["LunarLander-v3", "LunarLanderContinuous-v3"]:
        data["trajectories"][env_id] = [
            trajectory(env_id, s, pol, 60)
            for s, pol in [(1, random_policy), (2, random_policy), (3, heuristic_policy),
                           (4, heuristic_policy)]
        ]
        data["statistics"][env_id] = {
            "random": statistics(env_id, random_policy, 200),
            "heuristic": statistics(env_id, heuristic_policy, 200),
        }
    path = os.path.join(OUT, "LunarLander-v3.json")
    with open(path, "w") as f:
        json.dump(data, f, separators=(",", ":"))
    print(path, os.path.getsize(path), "bytes")
    for env_id, st in data["statistics"].items():
        for pol, s in st.items():
            print(env_id, pol, {k: round(v, 2) for k, v in s.items()})


if __name__ == "__main__":
    if "--walker-pose" in sys.argv:
        walker_pose()
    elif "--walker" in sys.argv:
        sys.argv.remove("--walker")
        walker_main()
    else:
        main()
