#!/usr/bin/env python3
"""CleanRL's own `ppo.py`, run unchanged except for its env construction, on rlrig's
vector env and on Gymnasium's, side by side.

    git clone https://github.com/vwxyzjn/cleanrl /tmp/cleanrl     # not part of rlrig
    bench/peers/.venv-sb3/bin/pip install tyro tensorboard        # ppo.py's imports (+ torch)
    bench/peers/.venv-sb3/bin/python bench/peers/cleanrl_ppo.py --cleanrl /tmp/cleanrl [--seeds 3]

The script reads `cleanrl/ppo.py`, replaces the one statement that builds `envs`
(`gym.vector.SyncVectorEnv([make_env(...) ...])`) with `gym.make_vec(ID, num_envs=...,
autoreset_mode=SAME_STEP)` wrapped in Gymnasium's `RecordEpisodeStatistics` (same-step
autoreset is what ppo.py's loop assumes, as Gymnasium 0.29 had it), and runs the rest as
is. ID is `rlrig/CartPole-v1` or Gymnasium's `CartPole-v1`; nothing else differs.
CleanRL reads episode returns from `infos["final_info"]` in Gymnasium 0.29's format, which
Gymnasium 1.x no longer produces (for its own envs too), so the returns are recorded by the
wrapper here and the mean of the last 20 episodes is printed with the wall time.
"""

import argparse
import re
import runpy  # noqa: F401  (documentation: the script runs as __main__)
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

ENVS_STATEMENT = re.compile(r"envs = gym\.vector\.SyncVectorEnv\(\s*\[make_env\(.*?\)\],?\s*\)", re.S)


class Returns(gym.wrappers.vector.RecordEpisodeStatistics):
    """RecordEpisodeStatistics that also keeps every finished episode's return."""

    log: list = []

    def step(self, actions):
        out = super().step(actions)
        info = out[4]
        if "episode" in info:
            Returns.log += list(info["episode"]["r"][info["_episode"]])
        return out


def bench_envs(env_id, num_envs):
    import rlrig  # noqa: F401  (registers rlrig/ ids)

    if env_id.startswith("rlrig/"):
        envs = gym.make_vec(env_id, num_envs=num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    else:
        envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    return Returns(envs)


def run(source, env_id, seed, steps, workdir):
    code = ENVS_STATEMENT.sub(f'envs = __bench_envs("{env_id}", args.num_envs)', source, count=1)
    assert code != source, "ppo.py's env construction was not found"
    Returns.log = []
    sys.argv = ["ppo.py", "--seed", str(seed), "--total-timesteps", str(steps), "--env-id", "CartPole-v1"]
    t0 = time.perf_counter()
    import os

    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        exec(compile(code, "cleanrl/ppo.py", "exec"), {"__name__": "__main__", "__file__": "ppo.py", "__bench_envs": bench_envs})
    finally:
        os.chdir(cwd)
    return time.perf_counter() - t0, list(Returns.log)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cleanrl", required=True, help="a checkout of github.com/vwxyzjn/cleanrl")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--workdir", default="/tmp/cleanrl-bench")
    args = ap.parse_args()
    source = (Path(args.cleanrl) / "cleanrl" / "ppo.py").read_text()
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(1)
    res = {}
    for seed in range(1, args.seeds + 1):
        for env_id in ("rlrig/CartPole-v1", "CartPole-v1"):
            wall, returns = run(source, env_id, seed, args.steps, args.workdir)
            res.setdefault(env_id, []).append((wall, np.mean(returns[-20:]), len(returns)))
            print(f"seed {seed} {env_id:18}: {wall:6.1f} s, {len(returns)} episodes, "
                  f"mean return of the last 20 {np.mean(returns[-20:]):6.1f}", flush=True)
    for env_id, rs in res.items():
        print(f"{env_id:18}: wall {np.mean([r[0] for r in rs]):.1f} s, last-20 means "
              + ", ".join(f"{r[1]:.1f}" for r in rs))


if __name__ == "__main__":
    main()
