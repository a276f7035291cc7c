#!/usr/bin/env python3
"""Steps/s of vector-env `step()` called from Python: rlrig vs EnvPool vs Gymnasium.

    python bench/peers/python_step.py [--envs CartPole-v1,BipedalWalker-v3] [--sizes 16,256,4096]
        [--threads T] [--seconds S] [--rounds R] [--json OUT]

Each (env, size) is measured for every library in turn, `--rounds` times (A, B, C,
A, B, C, ...), each round stepping for `--seconds`; the median round is reported,
with the per-call time (microseconds per `step`) and rlrig's ratio to each peer.
Actions are drawn once before timing (the same array every call), so the figure is
the library's stepping plus its Python crossing: what a training loop pays on top of
its own model. All libraries use `--threads` threads (default: every core) and
synchronous stepping (EnvPool's batch_size = num_envs). Peers that are not installed
are skipped and named. Run with bench/peers/.venv (setup.sh) after
`pip install ./python`.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def actions_for(space, n, rng):
    if hasattr(space, "n"):
        return rng.integers(0, int(space.n), n).astype(np.int64)
    return rng.uniform(-1, 1, (n, *space.shape)).astype(np.float32)


def make_rlrig(env_id, n, threads):
    import rlrig

    env = rlrig.make_vec(env_id, n, num_threads=threads, seed=0)
    env.reset()
    return env.step, env.single_action_space, env.close


def make_envpool(env_id, n, threads):
    import envpool

    env = envpool.make_gymnasium(env_id, num_envs=n, batch_size=n, num_threads=threads, seed=0)
    env.reset()
    return env.step, env.action_space, env.close


def make_gymnasium(env_id, n, threads):
    import gymnasium as gym

    env = gym.make_vec(env_id, num_envs=n, vectorization_mode="sync")
    env.reset(seed=0)
    return env.step, env.single_action_space, env.close


PEERS = {"rlrig": make_rlrig, "envpool": make_envpool, "gymnasium": make_gymnasium}


def run_round(step, actions, seconds):
    step(actions)  # warm
    calls = 0
    t0 = time.perf_counter()
    while True:
        for _ in range(8):
            step(actions)
        calls += 8
        dt = time.perf_counter() - t0
        if dt >= seconds:
            return calls, dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", default="CartPole-v1,BipedalWalker-v3")
    ap.add_argument("--sizes", default="16,256,4096")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peers", default="rlrig,envpool,gymnasium")
    ap.add_argument("--json")
    args = ap.parse_args()
    print(f"# python_step: {cpu_model()}, {args.threads} threads, Python {platform.python_version()}")
    results = []
    for env_id in args.envs.split(","):
        for n in [int(s) for s in args.sizes.split(",")]:
            made = {}
            for name in args.peers.split(","):
                try:
                    step, space, close = PEERS[name](env_id, n, args.threads)
                except Exception as e:  # not installed, or no such env there
                    print(f"{env_id:18} n={n:5} {name:10} skipped: {type(e).__name__}: {str(e)[:80]}")
                    continue
                made[name] = (step, actions_for(space, n, np.random.default_rng(0)), close)
            rounds = {name: [] for name in made}
            for _ in range(args.rounds):
                for name, (step, actions, _) in made.items():
                    calls, dt = run_round(step, actions, args.seconds)
                    rounds[name].append((calls * n / dt, dt / calls * 1e6))
            row = {"env": env_id, "num_envs": n}
            for name, rs in rounds.items():
                sps = statistics.median(r[0] for r in rs)
                us = statistics.median(r[1] for r in rs)
                row[name] = {"steps_per_s": sps, "us_per_call": us}
            for name, (_, _, close) in made.items():
                close()
            line = f"{env_id:18} n={n:5}"
            for name in rounds:
                line += f"  {name} {row[name]['steps_per_s'] / 1e6:8.3f} M/s ({row[name]['us_per_call']:8.1f} us/call)"
            for name in rounds:
                if name != "rlrig" and "rlrig" in row:
                    ratio = row["rlrig"]["steps_per_s"] / row[name]["steps_per_s"]
                    row[f"rlrig_over_{name}"] = ratio
                    line += f"  rlrig/{name} {ratio:6.2f}x"
            print(line, flush=True)
            results.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu_model(), "threads": args.threads, "results": results}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
