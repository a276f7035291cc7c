#!/usr/bin/env python3
"""Stable-Baselines3 (torch, CPU) on `rlrig bench learn`'s cells, written as a
`bench learn` result, so `rlrig compare rlrig-learn.json sb3-learn.json` prints the
two side by side with the ratio of their times to the threshold.

    bench/peers/.venv-sb3/bin/python bench/peers/learn_sb3.py --algo ppo|sac|dqn --env ID \
        [--seeds 1-5] [--jobs 2] [--out sb3-learn.json]

Each seed is one process with one torch thread, `--jobs` at a time (as `bench learn`
packs its seeds: 2 at a time, 1 thread each, on 2 cores). The settings are rlrig's
presets for the cell (`PpoConfig::for_env`), in SB3's terms:

- PPO CartPole-v1 / Acrobot-v1: CleanRL's ppo.py (4 envs x 128 steps, 4 minibatches x 4
  epochs, lr 2.5e-4 annealed to 0, gamma 0.99, GAE 0.95, clip 0.2 on the policy and the
  value, entropy 0.01, 64-64 tanh actor and critic), 500k steps; Acrobot with observation
  normalisation (VecNormalize, rewards left alone), as the preset.
- PPO MountainCar-v0: RL Zoo's ppo.yml (16 envs x 16 steps, batch 64, 4 epochs,
  gamma 0.99, GAE 0.98, entropy 0, VecNormalize on observations and rewards), 1M steps.
- PPO LunarLander-v3 / LunarLanderContinuous-v3: RL Zoo's ppo.yml (16 envs x 1,024 steps,
  batch 64, 4 epochs, gamma 0.999, GAE 0.98, entropy 0.01), 2M / 1M steps; the
  continuous one with VecNormalize on observations and rewards.

- SAC Pendulum-v1 (`OffPolicyConfig::for_env`): 64-64 ReLU actor and twin critics, batch
  256, learning rate 1e-3 (actor, critics and temperature), 1,000 random warm-up steps,
  buffer 1M, gamma 0.99, tau 0.005, automatic temperature (target entropy -1), one update
  per env step, 20k steps. rlrig (CleanRL's loop) trains the actor twice every second
  update; SB3 once every update: the same actor steps.
- DQN CartPole-v1 / Acrobot-v1 / LunarLander-v3 (`DqnConfig::for_env`, RL Zoo's dqn.yml):
  256-256 ReLU Q-network, Huber loss, gradient norm 10, and per env: CartPole lr 2.3e-3,
  batch 64, buffer 100k, learning_starts 1,000, target copy every 10 steps, 128 gradient
  steps every 256 env steps, epsilon 1 -> 0.04 over 16 %, 50k steps; Acrobot and
  LunarLander lr 6.3e-4 (LunarLander 3e-4), batch 128, buffer 50k, no warm-up, target
  copy every 250 steps, 4 gradient steps every 4 env steps, epsilon 1 -> 0.1 over 12 %,
  100k (Acrobot) and 500k (LunarLander) steps. rlrig's preset adds the double-DQN target,
  which SB3's DQN does not have; its greedy evaluation is 10 episodes (as `bench learn`'s
  DQN cells), 20 for the others.

Off-policy runs check the threshold every `log_every` env steps of rlrig's preset (500 on
Pendulum, 1,000 for DQN; metrics.csv's rows), on the last 20 finished episodes.

Differences that remain: with `clip_range_vf` SB3 takes the squared error of the clipped
value prediction, where CleanRL (and rlrig) take the larger of the clipped and unclipped
errors; SB3 anneals the learning rate by its own progress clock (per rollout, as CleanRL
per iteration). Both use one Adam (eps 1e-5) over separate 64-64 tanh actor and critic
networks with orthogonal initialisation and per-minibatch advantage normalisation.

Figures, as `bench learn` defines them: the greedy return (deterministic policy, 20
fresh episodes of Gymnasium's env, episode k reset with seed `seed + 1000003 + k`; with
VecNormalize's statistics frozen), and the env steps and training seconds at the first
rollout end where the mean return of the last 20 finished training episodes reaches
the threshold (None if it never does). Training seconds are `model.learn`'s wall time
up to that point (process start and evaluation excluded).
"""
import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import statistics
import time

THRESHOLD = {
    "CartPole-v1": 475.0,
    "Acrobot-v1": -100.0,
    "MountainCar-v0": -120.0,
    "LunarLander-v3": 200.0,
    "LunarLanderContinuous-v3": 200.0,
    "Pendulum-v1": -200.0,
}

# Student's t, 0.975 quantile, by degrees of freedom (as statrs gives rlrig).
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}


def t975(df):
    k = max(d for d in T975 if d <= df)
    return T975[k] if df <= 30 else 1.96


def offpolicy_preset(algo, env):
    """(total steps, SB3 kwargs, threshold check every N steps, greedy episodes) of an
    off-policy cell."""
    if algo == "sac" and env == "Pendulum-v1":
        kw = dict(learning_rate=1e-3, buffer_size=1_000_000, learning_starts=1_000,
                  batch_size=256, tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1,
                  ent_coef="auto", policy_kwargs=dict(net_arch=[64, 64]))
        return 20_000, kw, 500, 20
    if algo == "dqn" and env in ("CartPole-v1", "Acrobot-v1", "LunarLander-v3"):
        kw = dict(policy_kwargs=dict(net_arch=[256, 256]), gamma=0.99, max_grad_norm=10)
        if env == "CartPole-v1":
            kw.update(learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
                      learning_starts=1_000, target_update_interval=10, train_freq=256,
                      gradient_steps=128, exploration_fraction=0.16,
                      exploration_final_eps=0.04)
            return 50_000, kw, 1_000, 10
        kw.update(learning_rate=6.3e-4 if env == "Acrobot-v1" else 3e-4, batch_size=128,
                  buffer_size=50_000, learning_starts=0, target_update_interval=250,
                  train_freq=4, gradient_steps=4, exploration_fraction=0.12,
                  exploration_final_eps=0.1)
        return (100_000 if env == "Acrobot-v1" else 500_000), kw, 1_000, 10
    raise SystemExit(f"learn_sb3.py: no {algo} preset for {env}")


def preset(env):
    """(n_envs, total steps, PPO kwargs, VecNormalize kwargs or None)."""
    lin = lambda v: (lambda f: f * v)  # noqa: E731
    if env in ("CartPole-v1", "Acrobot-v1"):
        kw = dict(n_steps=128, batch_size=128, n_epochs=4, learning_rate=lin(2.5e-4),
                  gamma=0.99, gae_lambda=0.95, clip_range=0.2, clip_range_vf=0.2,
                  ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5)
        norm = dict(norm_obs=True, norm_reward=False) if env == "Acrobot-v1" else None
        return 4, 500_000, kw, norm
    if env == "MountainCar-v0":
        kw = dict(n_steps=16, batch_size=64, n_epochs=4, gamma=0.99, gae_lambda=0.98,
                  ent_coef=0.0)
        return 16, 1_000_000, kw, dict(norm_obs=True, norm_reward=True)
    if env in ("LunarLander-v3", "LunarLanderContinuous-v3"):
        kw = dict(n_steps=1024, batch_size=64, n_epochs=4, gamma=0.999, gae_lambda=0.98,
                  ent_coef=0.01)
        if env == "LunarLander-v3":
            return 16, 2_000_000, kw, None
        return 16, 1_000_000, kw, dict(norm_obs=True, norm_reward=True)
    raise SystemExit(f"learn_sb3.py: no preset for {env} (known: {', '.join(THRESHOLD)})")


def tracker(threshold, every):
    """An SB3 callback whose `hit` becomes (env steps, seconds since training began) when
    the last 20 finished episodes first average `threshold`: checked every `every` env
    steps, or at each rollout's end where `every` is None."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Track(BaseCallback):
        def __init__(self):
            super().__init__()
            self.t0 = None
            self.hit = None

        def _on_training_start(self):
            self.t0 = time.perf_counter()

        def check(self):
            if self.hit is not None:
                return
            eps = [e["r"] for e in self.model.ep_info_buffer][-20:]
            if len(eps) == 20 and sum(eps) / 20 >= threshold:
                self.hit = (float(self.model.num_timesteps), time.perf_counter() - self.t0)

        def _on_step(self):
            if every is not None and self.model.num_timesteps % every == 0:
                self.check()
            return True

        def _on_rollout_end(self):
            if every is None:
                self.check()

    return Track()


def run_offpolicy_seed(algo, env_id, seed, threshold, steps_override):
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN, SAC

    torch.set_num_threads(1)
    steps, kw, every, episodes = offpolicy_preset(algo, env_id)
    steps = steps_override or steps

    cls = SAC if algo == "sac" else DQN
    model = cls("MlpPolicy", gym.make(env_id), seed=seed, device="cpu", verbose=0, **kw)
    track = tracker(threshold, every)
    t0 = time.perf_counter()
    model.learn(steps, callback=track)
    train = time.perf_counter() - t0
    return seed_result(model, env_id, seed, episodes, lambda o: o, track.hit, train, t0)


def seed_result(model, env_id, seed, episodes, normalize, hit, train, t0):
    """A seed's `bench learn` entry: the greedy return over `episodes` fresh episodes
    (episode k reset with seed `seed + 1000003 + k`, observations through `normalize`),
    and the run's times and threshold crossing `hit` ((steps, seconds) or None)."""
    import gymnasium as gym
    import numpy as np

    rets = []
    for k in range(episodes):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=seed + 1_000_003 + k)
        done, total = False, 0.0
        while not done:
            a, _ = model.predict(normalize(obs), deterministic=True)
            obs, r, term, trunc, _ = env.step(a)
            total += float(r)
            done = term or trunc
        rets.append(total)
    return {
        "seed": seed,
        "status": "done",
        "final_return": float(np.mean(rets)),
        "env_steps": float(model.num_timesteps),
        "train_seconds": train,
        "wall_seconds": time.perf_counter() - t0,
        "steps_to_threshold": hit[0] if hit else None,
        "seconds_to_threshold": hit[1] if hit else None,
    }


def run_seed(args):
    algo, env_id, seed, threshold, steps_override = args
    if algo != "ppo":
        return run_offpolicy_seed(algo, env_id, seed, threshold, steps_override)
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    n_envs, steps, kw, norm = preset(env_id)
    steps = steps_override or steps
    venv = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    if norm:
        venv = VecNormalize(venv, gamma=kw["gamma"], **norm)

    model = PPO("MlpPolicy", venv, seed=seed, device="cpu", verbose=0, **kw)
    track = tracker(threshold, None)
    t0 = time.perf_counter()
    model.learn(steps, callback=track)
    train = time.perf_counter() - t0
    # Greedy evaluation on fresh envs, with the normalisation frozen.
    normalize = venv.normalize_obs if norm else (lambda o: o)
    return seed_result(model, env_id, seed, 20, normalize, track.hit, train, t0)


def spread(values):
    n = len(values)
    if n == 0:
        return None
    mean = sum(values) / n
    ci = None
    if n > 1:
        var = sum((v - mean) ** 2 for v in values) / (n - 1)
        ci = t975(n - 1) * math.sqrt(var / n)
    return {"n": n, "mean": mean, "ci95": ci, "min": min(values), "max": max(values)}


def machine(jobs):
    model = platform.processor() or "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem = next(int(line.split()[1]) // 1024 for line in open("/proc/meminfo")
                   if line.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem = 0
    return f"{model} | {os.cpu_count()} logical cores | {mem} MiB | SB3 peer, {jobs} seeds at a time"


def parse_seeds(s):
    out = []
    for part in s.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        else:
            out.append(int(part))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--algo", default="ppo", choices=["ppo", "sac", "dqn"])
    ap.add_argument("--env", required=True)
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--total-steps", type=int, default=None)
    ap.add_argument("--out", default="sb3-learn.json")
    args = ap.parse_args()
    import stable_baselines3
    import torch

    threshold = THRESHOLD.get(args.env)
    if threshold is None:
        raise SystemExit(f"learn_sb3.py: no threshold for {args.env}")
    # Fails early on an unknown cell.
    preset(args.env) if args.algo == "ppo" else offpolicy_preset(args.algo, args.env)
    seeds = parse_seeds(args.seeds)
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        outs = pool.map(run_seed, [(args.algo, args.env, s, threshold, args.total_steps)
                                   for s in seeds], chunksize=1)
    wall = time.perf_counter() - t0
    for o in outs:
        print(f"seed {o['seed']}: greedy return {o['final_return']:.1f} in {o['wall_seconds']:.1f} s"
              f", to threshold: {o['steps_to_threshold']} steps / {o['seconds_to_threshold']} s")
    finals = [o["final_return"] for o in outs]
    crossed = [o for o in outs if o["steps_to_threshold"] is not None]
    med = lambda k: statistics.median([o[k] for o in crossed]) if crossed else None  # noqa: E731
    cell = {
        "algo": args.algo, "env": args.env, "threshold": threshold,
        "steps": args.total_steps, "run_dir": "", "error": None, "seeds": outs,
        "final_return": spread(finals),
        "reached": sum(1 for f in finals if f >= threshold),
        "crossed": len(crossed),
        "steps_to_threshold": med("steps_to_threshold"),
        "seconds_to_threshold": med("seconds_to_threshold"),
        "wall_seconds": wall,
    }
    # Append to an existing result of this peer: one file holds every cell run.
    result = None
    if os.path.exists(args.out):
        with open(args.out) as f:
            result = json.load(f)
        result["cells"] = [c for c in result["cells"]
                           if (c["algo"], c["env"]) != (args.algo, args.env)]
    if result is None:
        result = {
            "suite": "rlrig-bench-learn", "version": 1,
            "rlrig": f"stable-baselines3 {stable_baselines3.__version__}, torch {torch.__version__}",
            "unix_time": int(time.time()), "quick": False, "threads": args.jobs,
            "seeds": seeds, "sets": [], "machine": machine(args.jobs), "probe": {},
            "cells": [],
        }
    result["cells"].append(cell)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, args.out)
    s = cell["final_return"]
    print(f"{args.algo} {args.env}: greedy {s['mean']:.1f} ± {s['ci95'] or 0:.1f} (95 % CI), "
          f"{cell['reached']} of {len(outs)} >= {threshold}; training return reached it in "
          f"{cell['crossed']} (median {cell['steps_to_threshold']} steps, "
          f"{cell['seconds_to_threshold']} s); {wall:.1f} s in all -> {args.out}")


if __name__ == "__main__":
    main()
