"""A CleanRL-style PPO in plain NumPy, written against Gymnasium's vector API, that
learns CartPole through `gymnasium.make_vec("rlrig/CartPole-v1", ...)`.

    python python/examples/ppo_numpy.py [--total-steps 150000] [--seed 1]

It is a client of the package, not part of it: everything rlrig-specific is the
`make_vec` id. The update follows CleanRL's `ppo.py` (separate 64-64 tanh actor and
critic with orthogonal init, GAE, clipped surrogate, entropy bonus, global gradient
clipping, Adam with linear annealing); gradients are written out by hand.
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

import rlrig  # noqa: F401  (registers the rlrig/ ids)


def orthogonal(rng, shape, gain):
    a = rng.standard_normal(shape)
    q, r = np.linalg.qr(a if shape[0] >= shape[1] else a.T)
    q = q * np.sign(np.diag(r))
    return (gain * (q if shape[0] >= shape[1] else q.T)).astype(np.float64)


class MLP:
    """in -> 64 tanh -> 64 tanh -> out, with forward caches for one backward."""

    def __init__(self, rng, n_in, n_out, last_gain):
        self.p = {
            "W1": orthogonal(rng, (n_in, 64), np.sqrt(2)), "b1": np.zeros(64),
            "W2": orthogonal(rng, (64, 64), np.sqrt(2)), "b2": np.zeros(64),
            "W3": orthogonal(rng, (64, n_out), last_gain), "b3": np.zeros(n_out),
        }

    def forward(self, x):
        p = self.p
        h1 = np.tanh(x @ p["W1"] + p["b1"])
        h2 = np.tanh(h1 @ p["W2"] + p["b2"])
        self.cache = (x, h1, h2)
        return h2 @ p["W3"] + p["b3"]

    def backward(self, dout):
        x, h1, h2 = self.cache
        p = self.p
        g = {"W3": h2.T @ dout, "b3": dout.sum(0)}
        dh2 = (dout @ p["W3"].T) * (1 - h2**2)
        g["W2"], g["b2"] = h1.T @ dh2, dh2.sum(0)
        dh1 = (dh2 @ p["W2"].T) * (1 - h1**2)
        g["W1"], g["b1"] = x.T @ dh1, dh1.sum(0)
        return g


class Adam:
    def __init__(self, params, lr, eps=1e-5, b1=0.9, b2=0.999):
        self.params, self.lr, self.eps, self.b1, self.b2, self.t = params, lr, eps, b1, b2, 0
        self.m = [{k: np.zeros_like(v) for k, v in p.items()} for p in params]
        self.v = [{k: np.zeros_like(v) for k, v in p.items()} for p in params]

    def step(self, grads):
        self.t += 1
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            for k in p:
                m[k] = self.b1 * m[k] + (1 - self.b1) * g[k]
                v[k] = self.b2 * v[k] + (1 - self.b2) * g[k] ** 2
                mh = m[k] / (1 - self.b1**self.t)
                vh = v[k] / (1 - self.b2**self.t)
                p[k] -= self.lr * mh / (np.sqrt(vh) + self.eps)


def log_softmax(z):
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def train(total_steps=150_000, seed=1, num_envs=8, num_steps=128, lr=2.5e-3, epochs=4,
          minibatches=4, gamma=0.99, lam=0.95, clip=0.2, ent_coef=0.01, vf_coef=0.5,
          max_grad_norm=0.5, env_id="rlrig/CartPole-v1"):
    """Trains and returns the returns of the episodes that ended, in order."""
    # Same-step autoreset (as CleanRL's loop expects): an ended episode's env is reset
    # within the step, so every stored transition belongs to one episode.
    envs = gym.make_vec(env_id, num_envs=num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    rng = np.random.default_rng(seed)
    n_obs = envs.single_observation_space.shape[0]
    n_act = int(envs.single_action_space.n)
    actor, critic = MLP(rng, n_obs, n_act, 0.01), MLP(rng, n_obs, 1, 1.0)
    opt = Adam([actor.p, critic.p], lr)
    batch = num_envs * num_steps
    mb = batch // minibatches
    obs_buf = np.zeros((num_steps, num_envs, n_obs))
    act_buf = np.zeros((num_steps, num_envs), np.int64)
    logp_buf, rew_buf, done_buf, val_buf = (np.zeros((num_steps, num_envs)) for _ in range(4))
    obs, _ = envs.reset(seed=seed)
    done = np.zeros(num_envs)
    returns = []
    iterations = total_steps // batch
    for it in range(iterations):
        opt.lr = lr * (1.0 - it / iterations)
        for t in range(num_steps):
            obs_buf[t], done_buf[t] = obs, done
            logits = actor.forward(obs.astype(np.float64))
            val_buf[t] = critic.forward(obs.astype(np.float64))[:, 0]
            logp = log_softmax(logits)
            a = (rng.random(num_envs)[:, None] > np.exp(logp).cumsum(1)).sum(1)
            a = np.minimum(a, n_act - 1)
            act_buf[t], logp_buf[t] = a, logp[np.arange(num_envs), a]
            obs, r, term, trunc, info = envs.step(a)
            rew_buf[t], done = r, (term | trunc).astype(np.float64)
            if "episode" in info:
                returns += list(info["episode"]["r"][info["_episode"]])
        next_v = critic.forward(obs.astype(np.float64))[:, 0]
        adv = np.zeros_like(rew_buf)
        last = 0.0
        for t in reversed(range(num_steps)):
            nonterminal = 1.0 - (done if t == num_steps - 1 else done_buf[t + 1])
            nv = next_v if t == num_steps - 1 else val_buf[t + 1]
            delta = rew_buf[t] + gamma * nv * nonterminal - val_buf[t]
            last = delta + gamma * lam * nonterminal * last
            adv[t] = last
        ret = adv + val_buf
        b_obs, b_act = obs_buf.reshape(batch, n_obs), act_buf.reshape(batch)
        b_logp, b_adv, b_ret = logp_buf.reshape(batch), adv.reshape(batch), ret.reshape(batch)
        for _ in range(epochs):
            order = rng.permutation(batch)
            for s in range(0, batch, mb):
                i = order[s:s + mb]
                x, a, A = b_obs[i], b_act[i], b_adv[i]
                A = (A - A.mean()) / (A.std() + 1e-8)
                logp = log_softmax(actor.forward(x))
                p = np.exp(logp)
                ratio = np.exp(logp[np.arange(mb), a] - b_logp[i])
                unclipped, clipped = -A * ratio, -A * np.clip(ratio, 1 - clip, 1 + clip)
                inside = (ratio > 1 - clip) & (ratio < 1 + clip)
                dratio = np.where(unclipped >= clipped, -A, np.where(inside, -A, 0.0)) / mb
                onehot = np.eye(n_act)[a]
                ent = -(p * logp).sum(1)
                dlogits = (dratio * ratio)[:, None] * (onehot - p)
                dlogits += ent_coef * p * (logp + ent[:, None]) / mb
                v = critic.forward(x)[:, 0]
                dv = (vf_coef * (v - b_ret[i]) / mb)[:, None]
                ga, gc = actor.backward(dlogits), critic.backward(dv)
                norm = np.sqrt(sum((g**2).sum() for g in (*ga.values(), *gc.values())))
                scale = min(1.0, max_grad_norm / (norm + 1e-6))
                opt.step([{k: g * scale for k, g in ga.items()}, {k: g * scale for k, g in gc.items()}])
    envs.close()
    return returns


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--total-steps", type=int, default=150_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rs = train(args.total_steps, args.seed)
    print(f"{len(rs)} episodes; mean return of the last 20: {np.mean(rs[-20:]):.1f}")
