"""Stable-Baselines3 SAC (torch, CPU) on Gymnasium's Pendulum-v1 with rlrig's
Pendulum preset: net_arch [H, H] (ReLU), batch 256, lr 1e-3, 1000 random warm-up
steps, one gradient step per env step, tau 0.005, gamma 0.99, ent_coef "auto"
(target entropy -dim(A)). SB3 updates actor and critics every step (no policy delay).

Prints one JSON line like sac_jax.py: wall seconds of model.learn, seconds inside
SAC.train (updates/s), the greedy 10-episode eval and the time to --threshold with
the same 500-step rule.

    bench/peers/.venv-sb3/bin/python bench/peers/sac_sb3.py [--total-steps N] [--seed S] [--hidden H]
"""
import argparse
import json
import os
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback

from peer_common import greedy_returns, time_updates, update_fields


class Track(BaseCallback):
    def __init__(self, threshold):
        super().__init__()
        self.threshold, self.ret, self.chunk, self.chunks, self.hit = threshold, 0.0, [], [], None
        self.start = time.time()

    def _on_step(self):
        self.ret += float(self.locals["rewards"][0])
        if self.locals["dones"][0]:
            self.chunk.append(self.ret)
            self.ret = 0.0
        if self.num_timesteps % 500 == 0:
            self.chunks.append(self.chunk)
            self.chunk = []
            recent = [x for c in self.chunks[-2:] for x in c]
            if self.hit is None and recent and np.mean(recent) >= self.threshold:
                self.hit = dict(step=self.num_timesteps, seconds=round(time.time() - self.start, 3))
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--total-steps", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--threshold", type=float, default=-250.0)
    a = ap.parse_args()
    # Every core, as rlrig's learner (issue 21) and XLA use them.
    torch.set_num_threads(os.cpu_count() or 1)
    env = gym.make("Pendulum-v1")
    model = SAC("MlpPolicy", env, learning_rate=1e-3, buffer_size=a.total_steps, learning_starts=1000,
                batch_size=256, tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto",
                policy_kwargs=dict(net_arch=[a.hidden, a.hidden]), seed=a.seed, device="cpu", verbose=0)
    spent = time_updates(model)
    cb = Track(a.threshold)
    t0 = time.time()
    model.learn(a.total_steps, callback=cb)
    wall = time.time() - t0
    rets = greedy_returns(env, lambda o: model.predict(o, deterministic=True)[0],
                          [1_000_003 + e for e in range(10)])
    import stable_baselines3
    print(json.dumps(dict(
        peer="sb3", env="Pendulum-v1", sb3=stable_baselines3.__version__, torch=torch.__version__,
        hidden=a.hidden, total_steps=a.total_steps, seed=a.seed, wall_seconds=round(wall, 3),
        **update_fields(spent),
        eval_mean_return=round(float(np.mean(rets)), 2), time_to_threshold=cb.hit, threshold=a.threshold)))


if __name__ == "__main__":
    main()
