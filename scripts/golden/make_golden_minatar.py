#!/usr/bin/env python3
"""Record MinAtar reference trajectories for rlrig's golden tests.

Usage:  python3 scripts/golden/make_golden_minatar.py [OUT_DIR]
Needs:  pip install minatar gymnasium numpy   (not needed by CI: the output is committed)

Sticky actions are switched off (sticky_action_prob=0): their draws come from NumPy's
generator, which rlrig does not reproduce, so with them on the same actions would not
give the same trajectory. Observations are stored sparsely: the indices of the 1s in
the flattened (10, 10, channels) boolean array.

Breakout's only random draw is its start, so its episodes store the initial state. The
other four games draw as they play (spawns, car speeds): their files store, per reset and
per step, every draw the game made (`["u", x]` for rand(), `["i", low, high, x]` for
randint), recorded by a wrapper around the game's RandomState; the Rust test feeds them
back and checks that it asks for the same draws in the same order. Their steps are
`{"r": reward, "t": terminated, "o": ones, "d": draws}` (no `d` when nothing was drawn;
MinAtar never truncates). Frames after step 300 are stored as `"h"`, as a 64-bit FNV-1a hash of the 1s' indices (u32 little-endian) to keep the files
small.
"""

import json
import os
import sys

import gymnasium as gym
import numpy as np
from minatar.gym import register_envs

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "crates", "rlrig-env", "tests", "golden")

FULL_TO_MINIMAL = {0: 0, 1: 1, 3: 2}  # 'n', 'l', 'r'


def breakout_state(env):
    g = env.unwrapped.game
    e = g.env
    return [float(e.ball_y), float(e.ball_x), float(e.ball_dir), float(e.pos), float(e.strike),
            float(e.last_x), float(e.last_y), float(e.terminal), float(FULL_TO_MINIMAL[g.last_action])] + \
        [float(v) for v in np.asarray(e.brick_map).reshape(-1)]


def follow(env, rng):
    """Move the paddle under where the ball will come down (bouncing off the walls)."""
    e = env.unwrapped.game.env
    dx = 1 if e.ball_dir in (1, 2) else -1
    x = e.ball_x
    if e.ball_dir in (2, 3):  # moving down
        for _ in range(9 - e.ball_y):
            x += dx
            if x < 0 or x > 9:
                x = min(max(x, 0), 9)
                dx = -dx
    elif rng.random() < 0.3:
        return int(rng.integers(3))
    return 1 if x < e.pos else (2 if x > e.pos else 0)


def random_policy(env, rng):
    return int(rng.integers(3))


def record(seed, name, policy, max_steps):
    env = gym.make("MinAtar/Breakout-v1", sticky_action_prob=0.0)
    env.reset(seed=seed)
    state = breakout_state(env)
    rng = np.random.default_rng(2000 + seed)
    actions, steps = [], []
    for _ in range(max_steps):
        a = policy(env, rng)
        obs, reward, terminated, truncated, _ = env.step(a)
        actions.append(a)
        steps.append({"ones": [int(i) for i in np.flatnonzero(np.asarray(obs).reshape(-1))],
                      "reward": float(reward), "terminated": bool(terminated), "truncated": bool(truncated)})
        if terminated or truncated:
            break
    env.close()
    return {"seed": seed, "policy": name, "state": state, "actions": actions, "steps": steps}


class Recorder:
    """Stands in for the game's RandomState and logs every draw, flattened."""

    def __init__(self, rs):
        self.rs = rs
        self.log = []

    def rand(self, *size):
        v = self.rs.rand(*size)
        for x in np.atleast_1d(v).reshape(-1):
            self.log.append(["u", float(x)])
        return v

    def randint(self, low, high=None, size=None):
        v = self.rs.randint(low, high, size)
        lo, hi = (0, low) if high is None else (low, high)
        for x in np.atleast_1d(v).reshape(-1):
            self.log.append(["i", int(lo), int(hi), int(x)])
        return v

    def take(self):
        out, self.log = self.log, []
        return out


def fnv(ones):
    h = 0xcbf29ce484222325
    for i in ones:
        for b in int(i).to_bytes(4, "little"):
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return format(h, "016x")


def frame(obs, t):
    ones = [int(i) for i in np.flatnonzero(np.asarray(obs).reshape(-1))]
    return {"o": ones} if t < 300 else {"h": fnv(ones)}


def survivor(env, rng, prefer=None):
    """One step of lookahead on a copy of the game: avoid actions that end it, take
    reward when offered, else move at random (or as `prefer` suggests)."""
    import copy
    game = env.unwrapped.game.env
    n = env.action_space.n
    scores = []
    for a in range(n):
        g = copy.deepcopy(game)
        r, done = g.act(env.unwrapped.action_set[a])
        scores.append(-100.0 if done else float(r))
    best = max(scores)
    choices = [a for a in range(n) if scores[a] == best]
    if prefer is not None and best <= 0:
        p = prefer(game)
        if p is not None and p in choices:
            return p
    return int(choices[rng.integers(len(choices))])


def seaquest_prefer(g):
    # Surface when oxygen runs low and a diver is aboard; otherwise stay below.
    if g.oxygen < 50 and g.diver_count > 0:
        return 2  # up
    if g.sub_y == 0:
        return 4  # down
    return None


def freeway_up(env, rng):
    return 1 if rng.random() < 0.9 else int(rng.integers(3))


def record_game(env_id, seed, name, policy, max_steps):
    env = gym.make(env_id, sticky_action_prob=0.0)
    env.reset(seed=seed)
    rec = Recorder(np.random.RandomState(1000 + seed))
    game = env.unwrapped.game
    game.env.random = rec
    game.env.reset()
    reset_draws = rec.take()
    ep = {"seed": seed, "policy": name, "reset_draws": reset_draws,
          "obs0": frame(game.state(), 0)["o"], "actions": [], "steps": []}
    rng = np.random.default_rng(3000 + seed)
    for t in range(max_steps):
        a = policy(env, rng)
        obs, reward, terminated, truncated, _ = env.step(a)
        ep["actions"].append(a)
        assert not truncated, "MinAtar has no time limit wrapper"
        step = {"r": float(reward), "t": int(terminated), **frame(obs, t)}
        draws = rec.take()
        if draws:
            step["d"] = draws
        ep["steps"].append(step)
        if terminated or truncated:
            break
    env.close()
    return ep


def write_doc(env_id, eps):
    """Writes the episodes of `env_id` to OUT/<env_id with - for />.json; returns the path."""
    import minatar
    doc = {"env": env_id, "minatar": getattr(minatar, "__version__", "1.0.15"),
           "gymnasium": gym.__version__, "sticky_action_prob": 0.0, "episodes": eps}
    path = os.path.join(OUT, env_id.replace("/", "-") + ".json")
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    return path


def write_game(env_id, eps):
    path = write_doc(env_id, eps)
    print(f"{env_id}: lengths {[len(e['steps']) for e in eps]}, "
          f"returns {[sum(s['r'] for s in e['steps']) for e in eps]}, "
          f"terminated {[e['steps'][-1]['t'] for e in eps]} -> {path} ({os.path.getsize(path)} bytes)")


def random_n(env, rng):
    return int(rng.integers(env.action_space.n))


def main():
    register_envs()
    os.makedirs(OUT, exist_ok=True)
    write_game("MinAtar/Asterix-v1", [
        record_game("MinAtar/Asterix-v1", 0, "random", random_n, 1000),
        record_game("MinAtar/Asterix-v1", 1, "survivor", survivor, 700),
        record_game("MinAtar/Asterix-v1", 2, "survivor", survivor, 700)])
    write_game("MinAtar/Freeway-v1", [
        record_game("MinAtar/Freeway-v1", 0, "up", freeway_up, 3000),
        record_game("MinAtar/Freeway-v1", 1, "random", random_n, 400)])
    write_game("MinAtar/Seaquest-v1", [
        record_game("MinAtar/Seaquest-v1", 0, "random", random_n, 1000),
        record_game("MinAtar/Seaquest-v1", 1, "survivor",
                    lambda e, r: survivor(e, r, seaquest_prefer), 1000),
        record_game("MinAtar/Seaquest-v1", 2, "survivor",
                    lambda e, r: survivor(e, r, seaquest_prefer), 1000)])
    write_game("MinAtar/SpaceInvaders-v1", [
        record_game("MinAtar/SpaceInvaders-v1", 0, "random", random_n, 1000),
        record_game("MinAtar/SpaceInvaders-v1", 1, "survivor", survivor, 1000)])
    eps = [record(0, "random", random_policy, 1000), record(1, "random", random_policy, 1000),
           record(2, "follow", follow, 400), record(3, "follow", follow, 400)]
    # Breakout's steps name their fields in full (see record).
    path = write_doc("MinAtar/Breakout-v1", eps)
    print(f"Breakout: lengths {[len(e['steps']) for e in eps]}, "
          f"returns {[sum(s['reward'] for s in e['steps']) for e in eps]}, "
          f"terminated {[e['steps'][-1]['terminated'] for e in eps]} -> {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
