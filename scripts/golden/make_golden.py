#!/usr/bin/env python3
"""Record reference trajectories from Gymnasium for rlrig's golden tests.

Usage:  python3 scripts/golden/make_golden.py [OUT_DIR]
Needs:  pip install gymnasium numpy   (not needed by CI: the output is committed)

For every env and a few (seed, policy) pairs, the script resets Gymnasium's env,
records `env.unwrapped.state` (the internal state rlrig's `replay` starts from), then
steps until the episode ends and records each step's observation, reward and flags.
Policies are chosen so that every env has episodes that end by termination and by
the time limit. Box actions are written as short decimal strings and converted to
float32 the same way on both sides (decimal -> float64 -> float32).
"""

import json
import math
import os
import sys

import gymnasium as gym
import numpy as np

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(__file__), "..", "..", "crates", "rlrig-env", "tests", "golden")


def short(x):
    """Shortest decimal that round-trips the float32 value, as a JSON number."""
    return float(str(np.float32(x)))


def cartpole_pd(obs, rng):
    x, x_dot, theta, theta_dot = obs
    return int(theta + 0.5 * theta_dot + 0.01 * x + 0.05 * x_dot > 0)


def acrobot_energy(obs, rng):
    # Pump energy: torque in the direction of the second joint's velocity.
    return 2 if obs[5] > 0 else 0


def mountain_momentum(obs, rng):
    return 2 if obs[1] > 0 else 0


def random_discrete(n):
    return lambda obs, rng: int(rng.integers(n))


def continuous_momentum(obs, rng):
    # Mostly in range, sometimes beyond the bounds to exercise the reference's clipping.
    mag = rng.choice([0.3, 0.8, 1.0, 1.7])
    return [f"{mag if obs[1] >= 0 else -mag:.4f}"]


def random_box(low, high):
    return lambda obs, rng: [f"{rng.uniform(low, high):.4f}"]


EPISODES = {
    "CartPole-v1": [(0, "random", random_discrete(2)), (1, "random", random_discrete(2)),
                    (2, "pd", cartpole_pd)],
    "Acrobot-v1": [(0, "energy", acrobot_energy), (1, "random", random_discrete(3))],
    "MountainCar-v0": [(0, "momentum", mountain_momentum), (1, "random", random_discrete(3))],
    "MountainCarContinuous-v0": [(0, "momentum", continuous_momentum),
                                 (1, "random", random_box(-1.5, 1.5))],
    "Pendulum-v1": [(0, "random", random_box(-2.5, 2.5)), (1, "random", random_box(-2.5, 2.5))],
}


def record(env_id, seed, policy_name, policy):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    state = [float(v) for v in np.asarray(env.unwrapped.state, dtype=np.float64)]
    rng = np.random.default_rng(1000 + seed)
    actions, steps = [], []
    while True:
        a = policy(obs, rng)
        if isinstance(a, list):
            actions.append([float(s) for s in a])
            act = np.array([float(s) for s in a], dtype=np.float32)
        else:
            actions.append(a)
            act = a
        obs, reward, terminated, truncated, _ = env.step(act)
        steps.append({
            "obs": [short(v) for v in obs],
            "reward": float(reward),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
        })
        if terminated or truncated:
            break
    env.close()
    return {"seed": seed, "policy": policy_name, "state": state, "actions": actions, "steps": steps}


def main():
    os.makedirs(OUT, exist_ok=True)
    for env_id, eps in EPISODES.items():
        doc = {
            "env": env_id,
            "gymnasium": gym.__version__,
            "numpy": np.__version__,
            "episodes": [record(env_id, s, name, pol) for s, name, pol in eps],
        }
        ends = ["terminated" if e["steps"][-1]["terminated"] else "truncated" for e in doc["episodes"]]
        lens = [len(e["steps"]) for e in doc["episodes"]]
        path = os.path.join(OUT, f"{env_id}.json")
        with open(path, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        print(f"{env_id}: lengths {lens}, ends {ends} -> {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
