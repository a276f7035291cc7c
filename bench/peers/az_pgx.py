"""AlphaZero self-play throughput with pgx (Connect Four, JAX) and mctx, for comparison
with `rlrig bench alphazero`.

The setup of pgx's AlphaZero example, with the network rlrig uses: an MLP of two
128-unit ReLU layers over the 6x7x2 observation, a policy head of 7 logits and a tanh
value head, untrained (throughput does not depend on the weights). One self-play step
searches every game of the batch with `mctx.muzero_policy` (or
`gumbel_muzero_policy` with --gumbel) under one jit, plays the chosen moves and
restarts finished games. A sample is one move chosen after a full search (the seed's
definition), so samples/s = batch x steps / seconds.

Prints one JSON line per (batch, simulations): compile seconds (the first step) and
samples/s over the timed steps.

    bench/peers/.venv/bin/python bench/peers/az_pgx.py [--batch 64 512] [--sims 500 64] [--steps 2] [--gumbel]
"""
import argparse
import json
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import flax.linen as nn  # noqa: E402
import mctx  # noqa: E402
import pgx  # noqa: E402


class Net(nn.Module):
    @nn.compact
    def __call__(self, obs):
        x = obs.reshape((obs.shape[0], -1)).astype(jnp.float32)
        x = nn.relu(nn.Dense(128)(x))
        x = nn.relu(nn.Dense(128)(x))
        return nn.Dense(7)(x), jnp.tanh(nn.Dense(1)(x))[:, 0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="+", default=[64, 512])
    ap.add_argument("--sims", type=int, nargs="+", default=[500, 64])
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--gumbel", action="store_true")
    a = ap.parse_args()
    env = pgx.make("connect_four")
    net = Net()
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 6, 7, 2)))
    init = jax.vmap(env.init)
    step = jax.vmap(env.step)

    def forward(obs, mask):
        logits, value = net.apply(params, obs)
        logits = logits - jnp.max(logits, axis=-1, keepdims=True)
        return jnp.where(mask, logits, jnp.finfo(logits.dtype).min), value

    def recurrent_fn(_, rng, action, state):
        player = state.current_player
        state = step(state, action)
        logits, value = forward(state.observation, state.legal_action_mask)
        b = jnp.arange(action.shape[0])
        reward = state.rewards[b, player]
        value = jnp.where(state.terminated, 0.0, value)
        discount = jnp.where(state.terminated, 0.0, -jnp.ones_like(value))
        return mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits, value=value), state

    for batch in a.batch:
        for sims in a.sims:
            @jax.jit
            def selfplay_step(state, key):
                k1, k2 = jax.random.split(key)
                logits, value = forward(state.observation, state.legal_action_mask)
                root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=state)
                if a.gumbel:
                    out = mctx.gumbel_muzero_policy(params=None, rng_key=k1, root=root, recurrent_fn=recurrent_fn,
                                                    num_simulations=sims, invalid_actions=~state.legal_action_mask)
                else:
                    out = mctx.muzero_policy(params=None, rng_key=k1, root=root, recurrent_fn=recurrent_fn,
                                             num_simulations=sims, invalid_actions=~state.legal_action_mask,
                                             dirichlet_fraction=0.25, dirichlet_alpha=0.3)
                nxt = step(state, out.action)
                fresh = init(jax.random.split(k2, batch))
                done = nxt.terminated | nxt.truncated
                nxt = jax.tree.map(lambda f, s: jnp.where(done.reshape((-1,) + (1,) * (s.ndim - 1)), f, s), fresh, nxt)
                return nxt, out.action_weights

            key = jax.random.PRNGKey(1)
            state = init(jax.random.split(key, batch))
            t0 = time.time()
            state, w = selfplay_step(state, key)
            jax.block_until_ready(w)
            compile_s = time.time() - t0
            t0 = time.time()
            for i in range(a.steps):
                state, w = selfplay_step(state, jax.random.PRNGKey(2 + i))
            jax.block_until_ready(w)
            secs = time.time() - t0
            print(json.dumps(dict(peer="pgx+mctx", jax=jax.__version__, pgx=pgx.__version__, mctx=mctx.__version__,
                                  policy="gumbel_muzero" if a.gumbel else "muzero", batch=batch,
                                  simulations=sims, steps=a.steps, first_step_seconds=round(compile_s, 2),
                                  seconds=round(secs, 3), samples_per_sec=round(batch * a.steps / secs, 2))),
                  flush=True)


if __name__ == "__main__":
    main()
