"""Stable-Baselines3 DQN (torch, CPU) on Gymnasium's CartPole-v1 with RL Baselines3
Zoo's dqn.yml CartPole-v1 setting, which is rlrig's `train dqn` CartPole-v1 preset:
50k env steps, 1 env, lr 2.3e-3, batch 64, buffer 100000, learning_starts 1000,
gamma 0.99, target_update_interval 10 (env steps; hard copy, tau 1), train_freq 256,
gradient_steps 128, exploration 1.0 -> 0.04 over the first 16% of the steps,
net_arch [256, 256], SB3's defaults for the rest (Huber loss, max_grad_norm 10,
Adam eps 1e-8). rlrig's preset also uses the double-DQN target; SB3 has none.

Prints one JSON line: wall and CPU (process_time) seconds of model.learn, seconds inside DQN.train
(updates/s), the greedy 10-episode eval (deterministic=True, a fresh env, episode e
reset with seed seed+1000003+e) and the time to --threshold: the first finished
training episode at which the mean return of the last 10 finished episodes is
>= threshold (`time_to_threshold`), and the same rule checked only at 1000-step
boundaries (`time_to_threshold_1k`, the granularity of rlrig's metrics.csv).
Both are {"step", "seconds" since the start of model.learn} or null. Also the highest
last-10 mean seen, at episode ends (`best_last10`) and at 1000-step boundaries
(`best_last10_1k`), as {"mean", "step"}.

    bench/peers/.venv-sb3/bin/python bench/peers/dqn_sb3.py [--seed S] [--total-steps N] \
        [--threshold R] [--torch-threads T]

Note: SB3 collects whole train_freq rollouts, so 50000 steps run to 50176 (196 x
256) with 193 train calls (24704 updates); rlrig stops at 50000 (24576 updates).
"""
import argparse
import json
import time

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback

from peer_common import greedy_returns, time_updates, update_fields


class Track(BaseCallback):
    def __init__(self, threshold, t0, window=10, every=1000):
        super().__init__()
        self.threshold, self.t0, self.window, self.every = threshold, t0, window, every
        self.ret, self.returns, self.hit, self.hit_1k = 0.0, [], None, None
        self.best, self.best_1k = None, None  # highest last-10 mean: {"mean", "step"}

    def _last(self):
        recent = self.returns[-self.window:]
        return float(np.mean(recent)) if len(recent) == self.window else None

    def _reached(self):
        v = self._last()
        return v is not None and v >= self.threshold

    def _keep_best(self, best):
        v = self._last()
        if v is not None and (best is None or v > best["mean"]):
            return dict(mean=round(v, 2), step=self.num_timesteps)
        return best

    def _on_step(self):
        self.ret += float(self.locals["rewards"][0])
        if self.locals["dones"][0]:  # terminated or truncated (500 steps)
            self.returns.append(self.ret)
            self.ret = 0.0
            self.best = self._keep_best(self.best)
            if self.hit is None and self._reached():
                self.hit = dict(step=self.num_timesteps, seconds=round(time.time() - self.t0[0], 3))
        if self.num_timesteps % self.every == 0:
            self.best_1k = self._keep_best(self.best_1k)
            if self.hit_1k is None and self._reached():
                self.hit_1k = dict(step=self.num_timesteps, seconds=round(time.time() - self.t0[0], 3))
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--total-steps", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threshold", type=float, default=475.0)
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch intra-op threads (default 1: rlrig runs with --threads 1)")
    a = ap.parse_args()
    torch.set_num_threads(a.torch_threads)
    env = gym.make("CartPole-v1")
    model = DQN("MlpPolicy", env, learning_rate=2.3e-3, buffer_size=100_000, learning_starts=1000,
                batch_size=64, tau=1.0, gamma=0.99, train_freq=256, gradient_steps=128,
                target_update_interval=10, exploration_fraction=0.16, exploration_initial_eps=1.0,
                exploration_final_eps=0.04, max_grad_norm=10,
                policy_kwargs=dict(net_arch=[256, 256]), seed=a.seed, device="cpu", verbose=0)
    spent = time_updates(model)
    t0 = [time.time()]
    cb = Track(a.threshold, t0)
    c0 = time.process_time()
    t0[0] = time.time()
    model.learn(a.total_steps, callback=cb)
    wall = time.time() - t0[0]
    cpu = time.process_time() - c0

    rets = greedy_returns(gym.make("CartPole-v1"), lambda o: model.predict(o, deterministic=True)[0],
                          [a.seed + 1_000_003 + e for e in range(10)])
    import stable_baselines3
    print(json.dumps(dict(
        peer="sb3", env="CartPole-v1", sb3=stable_baselines3.__version__, torch=torch.__version__,
        torch_threads=a.torch_threads, total_steps=a.total_steps, env_steps=model.num_timesteps,
        seed=a.seed, wall_seconds=round(wall, 3), cpu_seconds=round(cpu, 3), **update_fields(spent),
        train_episodes=len(cb.returns),
        eval_mean_return=round(float(np.mean(rets)), 2), eval_std_return=round(float(np.std(rets)), 2),
        time_to_threshold=cb.hit, time_to_threshold_1k=cb.hit_1k, threshold=a.threshold,
        best_last10=cb.best, best_last10_1k=cb.best_1k)))


if __name__ == "__main__":
    main()
