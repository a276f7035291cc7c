#!/usr/bin/env python3
"""Stable-Baselines3's PPO trained through rlrig's SB3 VecEnv adapter, beside the same
PPO on SB3's own vector env of Gymnasium's CartPole, in one run.

    bench/peers/.venv-sb3/bin/python bench/peers/sb3_ppo.py [--seeds 3] [--steps 100000]

RL Zoo's CartPole-v1 PPO hyperparameters (8 envs x 32 steps, 20 epochs, batch 256,
gae 0.8, gamma 0.98, linear lr 1e-3 and clip 0.2), torch on the CPU. For each seed,
rlrig then Gymnasium, alternating: wall time and the greedy policy's mean return over
20 episodes of Gymnasium's own CartPole (so both agents face the reference env). This
shows SB3 learns through the adapter as it does through its own envs; the wall time is
SB3's (torch updates dominate at this size), not rlrig's.
"""

import argparse
import os
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecMonitor

import rlrig.sb3


def zoo_ppo(env, seed):
    lin = lambda v: (lambda f: f * v)  # noqa: E731
    return PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
               n_epochs=20, ent_coef=0.0, learning_rate=lin(1e-3), clip_range=lin(0.2),
               seed=seed, device="cpu", verbose=0)


def run(kind, seed, steps):
    if kind == "rlrig":
        env = VecMonitor(rlrig.sb3.make_sb3_vec_env("CartPole-v1", 8, seed=seed, num_threads=1))
    else:
        env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = zoo_ppo(env, seed)
    t0 = time.perf_counter()
    model.learn(steps)
    wall = time.perf_counter() - t0
    mean, std = evaluate_policy(model, gym.make("CartPole-v1"), n_eval_episodes=20, deterministic=True)
    return wall, mean


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100_000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"# sb3_ppo: SB3 PPO (Zoo CartPole), {args.steps} steps, torch {torch.__version__} on CPU, 1 thread")
    res = {"rlrig": [], "gymnasium": []}
    for seed in range(1, args.seeds + 1):
        for kind in ("rlrig", "gymnasium"):
            wall, mean = run(kind, seed, args.steps)
            res[kind].append((wall, mean))
            print(f"seed {seed} {kind:9}: {wall:6.1f} s, greedy return {mean:6.1f}", flush=True)
    for kind, rs in res.items():
        w = np.array([r[0] for r in rs])
        m = np.array([r[1] for r in rs])
        print(f"{kind:9}: wall {w.mean():.1f} s, returns {', '.join(f'{x:.1f}' for x in m)} "
              f"(mean {m.mean():.1f} +- {m.std():.1f})")


if __name__ == "__main__":
    main()
