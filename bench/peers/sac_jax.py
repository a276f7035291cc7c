"""CleanRL-style SAC on Gymnasium's Pendulum-v1 in JAX (flax + optax, CPU), for
comparison with `rlrig train sac --env Pendulum-v1`.

It follows CleanRL's `sac_continuous_action.py` (its JAX siblings, e.g.
`td3_continuous_action_jax.py`, have the same structure): a Python loop steps one
Gymnasium env, the actor samples through a jitted call, transitions go to a NumPy
ring buffer, and each update is a jitted function (critic step + soft target
update; every `policy_frequency` updates, that many actor and temperature steps).
Hyperparameters are rlrig's Pendulum-v1 preset: ReLU MLPs of `--hidden` units,
batch 256, lr 1e-3 (actor, critics, temperature), gamma 0.99, tau 0.005,
1000 random warm-up steps, autotuned temperature starting at 1, target entropy
-dim(A). Kernels use PyTorch's default fan-in uniform initialisation, biases 0.

Prints one JSON line: wall seconds (after compiling, which is reported apart),
seconds spent in updates and updates/s, the greedy evaluation over 10 episodes,
and `time_to_threshold`: the wall time at the first 500-step boundary where the
training episodes that ended in the last 1000 steps average >= --threshold
(the same rule bench/peers/run_sac.sh applies to rlrig's metrics.csv).

    bench/peers/.venv/bin/python bench/peers/sac_jax.py [--total-steps N] [--seed S] [--hidden H]
"""
import argparse
import json
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import gymnasium as gym  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import flax.linen as nn  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

from peer_common import greedy_returns  # noqa: E402

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
torch_init = nn.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform")


class QNet(nn.Module):
    hidden: int

    @nn.compact
    def __call__(self, obs, act):
        x = jnp.concatenate([obs, act], -1)
        x = nn.relu(nn.Dense(self.hidden, kernel_init=torch_init)(x))
        x = nn.relu(nn.Dense(self.hidden, kernel_init=torch_init)(x))
        return nn.Dense(1, kernel_init=torch_init)(x)[..., 0]


class Actor(nn.Module):
    hidden: int
    act_dim: int

    @nn.compact
    def __call__(self, obs):
        x = nn.relu(nn.Dense(self.hidden, kernel_init=torch_init)(obs))
        x = nn.relu(nn.Dense(self.hidden, kernel_init=torch_init)(x))
        mean = nn.Dense(self.act_dim, kernel_init=torch_init)(x)
        log_std = jnp.tanh(nn.Dense(self.act_dim, kernel_init=torch_init)(x))
        return mean, LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--total-steps", type=int, default=20_000)
    ap.add_argument("--learning-starts", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threshold", type=float, default=-250.0)
    a = ap.parse_args()
    gamma, tau, pf = 0.99, 0.005, 2

    env = gym.make("Pendulum-v1")
    obs_dim = env.observation_space.shape[0]
    act_dim = env.action_space.shape[0]
    low, high = env.action_space.low, env.action_space.high
    scale = jnp.asarray((high - low) / 2.0)
    bias = jnp.asarray((high + low) / 2.0)
    actor, qnet = Actor(a.hidden, act_dim), QNet(a.hidden)
    key = jax.random.PRNGKey(a.seed)
    key, ka, k1, k2 = jax.random.split(key, 4)
    o0, a0 = jnp.zeros((1, obs_dim)), jnp.zeros((1, act_dim))
    actor_p = actor.init(ka, o0)
    q_p = (qnet.init(k1, o0, a0), qnet.init(k2, o0, a0))
    q_t = q_p
    log_alpha = jnp.zeros(())
    a_opt, q_opt, al_opt = optax.adam(a.lr), optax.adam(a.lr), optax.adam(a.lr)
    a_st, q_st, al_st = a_opt.init(actor_p), q_opt.init(q_p), al_opt.init(log_alpha)
    target_entropy = -float(act_dim)

    def sample(params, obs, k):
        mean, log_std = actor.apply(params, obs)
        std = jnp.exp(log_std)
        eps = jax.random.normal(k, mean.shape)
        x = mean + std * eps
        y = jnp.tanh(x)
        logp = -0.5 * eps**2 - log_std - 0.5 * jnp.log(2 * jnp.pi)
        logp = (logp - jnp.log(scale * (1 - y**2) + 1e-6)).sum(-1)
        return y * scale + bias, logp

    @jax.jit
    def act(params, obs, k):
        return sample(params, obs[None], k)[0][0]

    @jax.jit
    def greedy(params, obs):
        mean, _ = actor.apply(params, obs[None])
        return (jnp.tanh(mean) * scale + bias)[0]

    @jax.jit
    def critic_update(actor_p, q_p, q_t, q_st, log_alpha, b, k):
        o, ac, r, o2, d = b
        alpha = jnp.exp(log_alpha)
        a2, lp2 = sample(actor_p, o2, k)
        qn = jnp.minimum(qnet.apply(q_t[0], o2, a2), qnet.apply(q_t[1], o2, a2)) - alpha * lp2
        y = r + (1 - d) * gamma * qn

        def loss(qp):
            return ((qnet.apply(qp[0], o, ac) - y) ** 2).mean() + ((qnet.apply(qp[1], o, ac) - y) ** 2).mean()

        l, g = jax.value_and_grad(loss)(q_p)
        upd, q_st = q_opt.update(g, q_st, q_p)
        q_p = optax.apply_updates(q_p, upd)
        q_t = optax.incremental_update(q_p, q_t, tau)
        return q_p, q_t, q_st, l

    @jax.jit
    def actor_update(actor_p, a_st, q_p, log_alpha, al_st, o, k):
        def loss(ap):
            acts, lp = sample(ap, o, k)
            q = jnp.minimum(qnet.apply(q_p[0], o, acts), qnet.apply(q_p[1], o, acts))
            return (jnp.exp(log_alpha) * lp - q).mean(), lp

        (l, lp), g = jax.value_and_grad(loss, has_aux=True)(actor_p)
        upd, a_st = a_opt.update(g, a_st, actor_p)
        actor_p = optax.apply_updates(actor_p, upd)
        # Temperature from the same sample (as rlrig and Stable-Baselines3).
        ga = jax.grad(lambda la: (-jnp.exp(la) * (jax.lax.stop_gradient(lp) + target_entropy)).mean())(log_alpha)
        upd, al_st = al_opt.update(ga, al_st, log_alpha)
        return actor_p, a_st, optax.apply_updates(log_alpha, upd), al_st, l

    # Compile everything before the clock starts.
    t0 = time.time()
    bs = a.batch_size
    dummy = (jnp.zeros((bs, obs_dim)), jnp.zeros((bs, act_dim)), jnp.zeros(bs), jnp.zeros((bs, obs_dim)), jnp.zeros(bs))
    jax.block_until_ready(act(actor_p, jnp.zeros(obs_dim), key))
    jax.block_until_ready(greedy(actor_p, jnp.zeros(obs_dim)))
    jax.block_until_ready(critic_update(actor_p, q_p, q_t, q_st, log_alpha, dummy, key))
    jax.block_until_ready(actor_update(actor_p, a_st, q_p, log_alpha, al_st, dummy[0], key))
    compile_s = time.time() - t0

    cap = a.total_steps
    B = dict(o=np.zeros((cap, obs_dim), np.float32), a=np.zeros((cap, act_dim), np.float32),
             r=np.zeros(cap, np.float32), o2=np.zeros((cap, obs_dim), np.float32), d=np.zeros(cap, np.float32))
    rng = np.random.default_rng(a.seed)
    obs, _ = env.reset(seed=a.seed)
    ep_ret, chunk = 0.0, []
    chunks = []  # (step, wall, [returns ending in this 500-step chunk])
    updates, update_s, to_threshold = 0, 0.0, None
    start = time.time()
    for step in range(a.total_steps):
        if step < a.learning_starts:
            action = rng.uniform(low, high).astype(np.float32)
        else:
            key, k = jax.random.split(key)
            action = np.asarray(act(actor_p, jnp.asarray(obs), k))
        nobs, r, term, trunc, _ = env.step(action)
        B["o"][step], B["a"][step], B["r"][step], B["o2"][step], B["d"][step] = obs, action, r, nobs, float(term)
        ep_ret += r
        if term or trunc:
            chunk.append(ep_ret)
            ep_ret = 0.0
            nobs, _ = env.reset()
        obs = nobs
        gs = step + 1
        if gs > a.learning_starts:
            tu = time.time()
            idx = rng.integers(0, gs, bs)
            b = (B["o"][idx], B["a"][idx], B["r"][idx], B["o2"][idx], B["d"][idx])
            key, k = jax.random.split(key)
            q_p, q_t, q_st, _ = critic_update(actor_p, q_p, q_t, q_st, log_alpha, b, k)
            if updates % pf == 0:
                for _ in range(pf):
                    key, k = jax.random.split(key)
                    actor_p, a_st, log_alpha, al_st, _ = actor_update(actor_p, a_st, q_p, log_alpha, al_st, b[0], k)
            jax.block_until_ready(q_p)
            updates += 1
            update_s += time.time() - tu
        if gs % 500 == 0:
            chunks.append((gs, time.time() - start, chunk))
            chunk = []
            recent = [x for c in chunks[-2:] for x in c[2]]
            if to_threshold is None and recent and np.mean(recent) >= a.threshold:
                to_threshold = dict(step=gs, seconds=round(time.time() - start, 3))
    wall = time.time() - start
    rets = greedy_returns(env, lambda o: np.asarray(greedy(actor_p, jnp.asarray(o))),
                          [1_000_003 + e for e in range(10)])
    print(json.dumps(dict(
        peer="cleanrl-style-jax-sac", env="Pendulum-v1", jax=jax.__version__, hidden=a.hidden,
        total_steps=a.total_steps, seed=a.seed, compile_seconds=round(compile_s, 3),
        wall_seconds=round(wall, 3), update_seconds=round(update_s, 3), updates=updates,
        updates_per_sec=round(updates / update_s, 1) if update_s else None,
        eval_mean_return=round(float(np.mean(rets)), 2), time_to_threshold=to_threshold,
        threshold=a.threshold)))


if __name__ == "__main__":
    main()
