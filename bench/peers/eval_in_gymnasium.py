#!/usr/bin/env python3
"""Evaluates a trained rlrig policy in Gymnasium's own env and in rlrig's, side by side.

Usage:  python bench/peers/eval_in_gymnasium.py RUN_DIR [--episodes 100] [--seed 0] [--json OUT]
Needs:  the rlrig package (`pip install ./python`), gymnasium and box2d (`bench/peers/setup.sh`).

The policy is the run's greedy policy (`rlrig.load(RUN_DIR).act`, what `rlrig eval` does).
Each side plays `--episodes` episodes from seeds seed, seed+1, ... in one env reset per
episode, as a user would. The two sides draw different terrain and noise (numpy's generator
against rlrig's), so the comparison is statistical: the mean returns, their standard errors
and the difference in standard errors of the difference (|z| <= 2: the same task as far as
this policy can tell). Issue 25: a policy trained in rlrig must score the same in Gymnasium.
"""

import argparse
import json
import math
import sys

import gymnasium as gym
import numpy as np

import rlrig


def play(env: gym.Env, policy: rlrig.Policy, episodes: int, seed: int) -> list[float]:
    returns = []
    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        total, done = 0.0, False
        while not done:
            a = policy.act(obs)
            if isinstance(env.action_space, gym.spaces.Discrete):
                a = int(a)
            obs, r, term, trunc, _ = env.step(a)
            total += float(r)
            done = term or trunc
        returns.append(total)
    return returns


def summary(xs: list[float]) -> dict:
    a = np.asarray(xs)
    return {"episodes": len(xs), "mean": float(a.mean()), "std": float(a.std(ddof=1)),
            "se": float(a.std(ddof=1) / math.sqrt(len(xs)))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    policy = rlrig.load(args.run_dir)
    if policy.env_args:
        print(f"eval_in_gymnasium: the run uses env args {policy.env_args}; Gymnasium's "
              "env is made with its defaults", file=sys.stderr)
    rlrig.register_envs()
    sides = {}
    for side, env_id in [("gymnasium", policy.env_id), ("rlrig", f"rlrig/{policy.env_id}")]:
        env = gym.make(env_id)
        sides[side] = summary(play(env, policy, args.episodes, args.seed))
        env.close()
    g, r = sides["gymnasium"], sides["rlrig"]
    z = (r["mean"] - g["mean"]) / math.sqrt(g["se"] ** 2 + r["se"] ** 2)
    out = {"run_dir": args.run_dir, "env": policy.env_id, "gymnasium": g, "rlrig": r, "z": z,
           "same_within_2se": abs(z) <= 2.0}
    for side in ["rlrig", "gymnasium"]:
        s = sides[side]
        print(f"{policy.env_id} in {side:9}: {s['mean']:8.1f} ± {s['std']:.1f} "
              f"(se {s['se']:.1f}, {s['episodes']} episodes)")
    print(f"difference {r['mean'] - g['mean']:+.1f} = {z:+.2f} standard errors: "
          f"{'same within 2 SE' if abs(z) <= 2 else 'NOT the same within 2 SE'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
