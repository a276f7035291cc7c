#!/usr/bin/env python3
"""Record MinAtar reference trajectories for rlrig's golden tests.

Usage:  python3 scripts/golden/make_golden_minatar.py [OUT_DIR]
Needs:  pip install minatar gymnasium numpy   (not needed by CI: the output is committed)

Sticky actions are switched off (sticky_action_prob=0): their draws come from NumPy's
generator, which rlrig does not reproduce, so with them on the same actions would not
give the same trajectory. Observations are stored sparsely: the indices of the 1s in
the flattened (10, 10, channels) boolean array.
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


def main():
    register_envs()
    os.makedirs(OUT, exist_ok=True)
    eps = [record(0, "random", random_policy, 1000), record(1, "random", random_policy, 1000),
           record(2, "follow", follow, 400), record(3, "follow", follow, 400)]
    import minatar
    doc = {"env": "MinAtar/Breakout-v1", "minatar": getattr(minatar, "__version__", "1.0.15"),
           "gymnasium": gym.__version__, "sticky_action_prob": 0.0, "episodes": eps}
    path = os.path.join(OUT, "MinAtar-Breakout-v1.json")
    with open(path, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"Breakout: lengths {[len(e['steps']) for e in eps]}, "
          f"returns {[sum(s['reward'] for s in e['steps']) for e in eps]}, "
          f"terminated {[e['steps'][-1]['terminated'] for e in eps]} -> {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
