"""PureJaxRL-style PPO on gymnax CartPole-v1, Acrobot-v1 or the MinAtar games (JAX, CPU),
for comparison with `rlrig train ppo --env ID`.

The whole training run is one jitted function: a `lax.scan` over updates;
each update scans over rollout steps (vmapped gymnax envs, whose `step`
auto-resets), computes GAE with a reverse scan, then scans over epochs and
minibatches. Hyperparameters are CleanRL ppo.py's (the ones rlrig uses):

    4 envs x 128 steps, 4 epochs x 4 minibatches, adam lr 2.5e-4 (eps 1e-5)
    linearly annealed, gamma 0.99, GAE lambda 0.95, clip 0.2 (policy and
    value), entropy 0.01, value 0.5, global grad-norm clip 0.5, advantages
    normalised per minibatch, separate 64-64 tanh actor and critic with
    orthogonal init (sqrt 2; actor head 0.01, critic head 1), zero biases.

With `--env MinAtar/<Game>-v1` (gymnax's `<Game>-MinAtar`) the settings are
PureJaxRL's own MinAtar PPO (its `examples/brax_minatar.ipynb`, which trains
SpaceInvaders-MinAtar to a training return of ~170 in 10M steps), rlrig's MinAtar
preset: 64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-3 annealed, the
flattened observation into separate 64-64 ReLU actor and critic. With `--conv`:
rlrig's earlier MinAtar preset (A2C's and IMPALA's network still), lr 5e-4 and
MinAtar's network for actor and critic each (one 3x3 valid convolution with 16
channels, ReLU, 128 ReLU units). Orthogonal init as above.

Episode ends (termination or gymnax's 500-step truncation) are treated as
terminal, as in CleanRL's ppo.py and PureJaxRL.

Prints one JSON line: compile time (lower + compile), the first call of the
compiled function, and `train_seconds` = a second call (block_until_ready); with
`--single-call` (long runs) the first call is the one timed. With `--threshold R`,
`seconds_to_threshold` and `steps_to_threshold` are where the mean return of the
last 20 finished training episodes first reaches R (rlrig's `bench learn` rule),
counted in whole updates, the seconds as that share of `train_seconds` (the
updates are one scan, so each takes the same time).
`final_return` is the mean return of the training episodes that finished in
the last `--final-updates` updates (stochastic policy, not a greedy eval).

    bench/peers/.venv/bin/python bench/peers/ppo_jax.py [--total-steps N] [--seed S]
Environment: PPO_TOTAL_STEPS overrides the default step count (500000).
"""
import argparse
import json
import os
import sys
import time

# CPU unless told otherwise (JAX_PLATFORMS=cuda for the GPU runs).
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# XLA_FLAGS is left as it is: XLA:CPU may use every core (2 here).

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import flax.linen as nn  # noqa: E402
import optax  # noqa: E402
import gymnax  # noqa: E402

from peer_common import crossing  # noqa: E402

HP = dict(
    num_envs=4,
    num_steps=128,
    update_epochs=4,
    num_minibatches=4,
    lr=2.5e-4,
    gamma=0.99,
    gae_lambda=0.95,
    clip_eps=0.2,
    ent_coef=0.01,
    vf_coef=0.5,
    max_grad_norm=0.5,
    hidden=64,
)


def dense(features, scale):
    return nn.Dense(
        features,
        kernel_init=nn.initializers.orthogonal(scale),
        bias_init=nn.initializers.zeros,
    )


class ActorCritic(nn.Module):
    """Separate two-layer actor and critic: CleanRL's tanh MLPs, or with `relu` and
    `flatten` PureJaxRL's MinAtar agent (the image observation flattened)."""
    num_actions: int
    hidden: int = 64
    act: str = "tanh"
    flatten: bool = False

    @nn.compact
    def __call__(self, obs):
        s2 = jnp.sqrt(2.0)
        f = nn.relu if self.act == "relu" else nn.tanh
        if self.flatten:
            obs = obs.reshape(obs.shape[:-3] + (-1,))
        a = f(dense(self.hidden, s2)(obs))
        a = f(dense(self.hidden, s2)(a))
        logits = dense(self.num_actions, 0.01)(a)
        c = f(dense(self.hidden, s2)(obs))
        c = f(dense(self.hidden, s2)(c))
        value = dense(1, 1.0)(c)
        return logits, jnp.squeeze(value, -1)


class ConvActorCritic(nn.Module):
    """MinAtar's reference network (Young & Tian 2019), separate for actor and critic."""
    num_actions: int
    hidden: int = 128
    channels: int = 16

    @nn.compact
    def __call__(self, obs):
        s2 = jnp.sqrt(2.0)

        def torso(x):
            x = nn.Conv(self.channels, (3, 3), padding="VALID",
                        kernel_init=nn.initializers.orthogonal(s2),
                        bias_init=nn.initializers.zeros)(x)
            x = nn.relu(x).reshape(x.shape[:-3] + (-1,))
            return nn.relu(dense(self.hidden, s2)(x))

        logits = dense(self.num_actions, 0.01)(torso(obs))
        value = dense(1, 1.0)(torso(obs))
        return logits, jnp.squeeze(value, -1)


MINATAR_HP = dict(HP, num_envs=64, num_steps=128, num_minibatches=8, lr=5e-3, hidden=64)
MINATAR_CONV_HP = dict(MINATAR_HP, lr=5e-4, hidden=128)
GYMNAX_IDS = {"CartPole-v1": "CartPole-v1", "Acrobot-v1": "Acrobot-v1"}
GYMNAX_IDS.update({f"MinAtar/{g}-v1": f"{g}-MinAtar"
                   for g in ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]})


def log_prob(logits, actions):
    logp = jax.nn.log_softmax(logits)
    return jnp.take_along_axis(logp, actions[..., None], axis=-1)[..., 0]


def entropy(logits):
    logp = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


def make_train(total_steps, env_id="CartPole-v1", conv=False, sticky=0.0, max_steps=None):
    minatar = env_id.startswith("MinAtar/")
    conv = minatar and conv
    hp = MINATAR_CONV_HP if conv else MINATAR_HP if minatar else HP
    n_envs, n_steps = hp["num_envs"], hp["num_steps"]
    batch = n_envs * n_steps
    num_updates = total_steps // batch
    mb_size = batch // hp["num_minibatches"]
    env, env_params = gymnax.make(GYMNAX_IDS[env_id])
    if max_steps is not None:
        env_params = env_params.replace(max_steps_in_episode=max_steps)
    n_actions = env.action_space(env_params).n
    if conv:
        net = ConvActorCritic(n_actions, hp["hidden"])
    elif minatar:
        net = ActorCritic(n_actions, hp["hidden"], act="relu", flatten=True)
    else:
        net = ActorCritic(n_actions, hp["hidden"])
    grad_steps_per_update = hp["update_epochs"] * hp["num_minibatches"]

    def lr_schedule(count):
        # CleanRL: lr * (1 - (update - 1) / num_updates), constant within an update
        frac = 1.0 - (count // grad_steps_per_update) / num_updates
        return hp["lr"] * frac

    tx = optax.chain(
        optax.clip_by_global_norm(hp["max_grad_norm"]),
        optax.adam(learning_rate=lr_schedule, eps=1e-5),
    )

    def train(key):
        key, k_net, k_env = jax.random.split(key, 3)
        obs_dim = env.observation_space(env_params).shape
        params = net.init(k_net, jnp.zeros(obs_dim))
        opt_state = tx.init(params)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(k_env, n_envs), env_params
        )
        ep_ret = jnp.zeros(n_envs)
        # MinAtar's sticky actions (the package's `act`, as rlrig's envs apply them):
        # with probability `sticky` the env repeats its previous action; a new episode
        # starts from no-op (0). gymnax's games leave them out.
        last = jnp.zeros(n_envs, dtype=jnp.int32)
        env_state = (env_state, last)

        def rollout_step(carry, _):
            params, (env_state, last), obs, ep_ret, key = carry
            key, k_act, k_step, k_sticky = jax.random.split(key, 4)
            logits, value = net.apply(params, obs)
            action = jax.random.categorical(k_act, logits)
            logp = log_prob(logits, action)
            taken = action
            if sticky > 0:
                repeat = jax.random.uniform(k_sticky, (n_envs,)) < sticky
                taken = jnp.where(repeat, last, action)
            next_obs, env_state, reward, term, trunc, _ = jax.vmap(
                env.step, in_axes=(0, 0, 0, None)
            )(jax.random.split(k_step, n_envs), env_state, taken, env_params)
            done = jnp.logical_or(term, trunc)
            env_state = (env_state, jnp.where(done, 0, taken).astype(jnp.int32))
            ep_ret = ep_ret + reward
            finished_ret = jnp.where(done, ep_ret, 0.0)
            ep_ret = jnp.where(done, 0.0, ep_ret)
            tr = (obs, action, logp, value, reward, done.astype(jnp.float32), finished_ret)
            return (params, env_state, next_obs, ep_ret, key), tr

        def loss_fn(params, mb):
            obs, action, old_logp, old_value, adv, ret = mb
            logits, value = net.apply(params, obs)
            logp = log_prob(logits, action)
            ratio = jnp.exp(logp - old_logp)
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            pg = jnp.maximum(
                -adv * ratio,
                -adv * jnp.clip(ratio, 1 - hp["clip_eps"], 1 + hp["clip_eps"]),
            ).mean()
            v_clipped = old_value + jnp.clip(value - old_value, -hp["clip_eps"], hp["clip_eps"])
            v_loss = 0.5 * jnp.maximum((value - ret) ** 2, (v_clipped - ret) ** 2).mean()
            ent = entropy(logits).mean()
            return pg - hp["ent_coef"] * ent + hp["vf_coef"] * v_loss

        grad_fn = jax.grad(loss_fn)

        def update(carry, _):
            params, opt_state, env_state, obs, ep_ret, key = carry
            (params, env_state, obs, ep_ret, key), traj = jax.lax.scan(
                rollout_step, (params, env_state, obs, ep_ret, key), None, n_steps
            )
            t_obs, t_act, t_logp, t_val, t_rew, t_done, t_fin = traj
            _, last_val = net.apply(params, obs)

            def gae_step(carry, x):
                gae, next_val = carry
                val, rew, done = x
                delta = rew + hp["gamma"] * next_val * (1 - done) - val
                gae = delta + hp["gamma"] * hp["gae_lambda"] * (1 - done) * gae
                return (gae, val), gae

            _, adv = jax.lax.scan(
                gae_step, (jnp.zeros(n_envs), last_val), (t_val, t_rew, t_done), reverse=True
            )
            ret = adv + t_val
            flat = jax.tree_util.tree_map(
                lambda x: x.reshape((batch,) + x.shape[2:]),
                (t_obs, t_act, t_logp, t_val, adv, ret),
            )

            def epoch(carry, _):
                params, opt_state, key = carry
                key, k_perm = jax.random.split(key)
                perm = jax.random.permutation(k_perm, batch)
                mbs = jax.tree_util.tree_map(
                    lambda x: x[perm].reshape((hp["num_minibatches"], mb_size) + x.shape[1:]), flat
                )

                def minibatch(carry, mb):
                    params, opt_state = carry
                    grads = grad_fn(params, mb)
                    upd, opt_state = tx.update(grads, opt_state, params)
                    return (optax.apply_updates(params, upd), opt_state), None

                (params, opt_state), _ = jax.lax.scan(minibatch, (params, opt_state), mbs)
                return (params, opt_state, key), None

            (params, opt_state, key), _ = jax.lax.scan(
                epoch, (params, opt_state, key), None, hp["update_epochs"]
            )
            metrics = (t_fin.sum(), t_done.sum())  # returns of finished episodes, count
            return (params, opt_state, env_state, obs, ep_ret, key), metrics

        carry = (params, opt_state, env_state, obs, ep_ret, key)
        carry, metrics = jax.lax.scan(update, carry, None, num_updates)
        return carry[0], metrics

    return train, num_updates * batch, num_updates, batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--total-steps", type=int,
                    default=int(os.environ.get("PPO_TOTAL_STEPS", "500000")))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--seeds", type=int, default=1,
                    help="train this many seeds at once, jax.vmap over the whole "
                         "training function (PureJaxRL's way of using a GPU)")
    ap.add_argument("--env", default="CartPole-v1", choices=sorted(GYMNAX_IDS))
    ap.add_argument("--conv", action="store_true",
                    help="MinAtar: MinAtar's conv network at lr 5e-4 (rlrig's earlier "
                         "preset) instead of PureJaxRL's 64-64 ReLU MLPs at 5e-3")
    ap.add_argument("--sticky", type=float, default=0.0,
                    help="MinAtar: sticky actions with this probability (rlrig's "
                         "default env: 0.1; gymnax: none)")
    ap.add_argument("--max-steps", type=int, default=None,
                    help="the env's max_steps_in_episode (gymnax's MinAtar: 1,000; "
                         "rlrig's default MinAtar env has no limit). Freeway's is the "
                         "game's own end (2,500 steps): leave it")
    ap.add_argument("--single-call", action="store_true",
                    help="time the first call (long runs), not a second one")
    ap.add_argument("--threshold", type=float, default=None,
                    help="report the steps and seconds to this training return")
    ap.add_argument("--curve", action="store_true",
                    help="add each update's finished-episode return sum and count")
    ap.add_argument("--final-updates", type=int, default=20,
                    help="final_return averages episodes finished in the last N updates")
    args = ap.parse_args()

    train, steps, num_updates, batch = make_train(args.total_steps, args.env, args.conv,
                                                    args.sticky, args.max_steps)
    key = jax.random.PRNGKey(args.seed)
    if args.seeds > 1:
        train = jax.vmap(train)
        key = jax.random.split(key, args.seeds)

    t0 = time.perf_counter()
    compiled = jax.jit(train).lower(key).compile()
    compile_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    _, (ret_sum, ep_count) = jax.block_until_ready(compiled(key))
    first_s = time.perf_counter() - t0

    train_s = first_s
    if not args.single_call:
        t0 = time.perf_counter()
        _, (ret_sum, ep_count) = jax.block_until_ready(compiled(key))
        train_s = time.perf_counter() - t0
    hit = None
    if args.threshold is not None and args.seeds == 1:
        u = crossing(ret_sum.tolist(), ep_count.tolist(), args.threshold)
        if u is not None:
            hit = ((u + 1) * batch, train_s * (u + 1) / num_updates)

    k = min(args.final_updates, num_updates)
    # Metrics are (updates,) for one seed, (seeds, updates) for many: pool them.
    n = float(ep_count[..., -k:].sum())
    final_return = float(ret_sum[..., -k:].sum()) / n if n > 0 else None
    per_seed = None
    if args.seeds > 1:
        c = ep_count[:, -k:].sum(axis=1)
        r = ret_sum[:, -k:].sum(axis=1) / jnp.maximum(c, 1)
        per_seed = {"min": round(float(r.min()), 2), "median": round(float(jnp.median(r)), 2),
                    "seeds_at_least_475": int((r >= 475).sum()),
                    "each": [round(float(x), 2) for x in r]}
    print(json.dumps({
        "peer": "purejaxrl-style",
        "env": args.env,
        "sticky": args.sticky,
        "max_steps_in_episode": args.max_steps,
        "net": "conv" if args.conv and args.env.startswith("MinAtar/") else "mlp",
        "total_steps": steps,
        "num_updates": num_updates,
        "compile_seconds": round(compile_s, 3),
        "first_call_seconds": round(first_s, 3),
        "train_seconds": round(train_s, 3),
        "seconds_including_compile": round(compile_s + first_s, 3),
        "steps_per_sec": round(steps * args.seeds / train_s, 1),
        "final_return": None if final_return is None else round(final_return, 2),
        "final_return_episodes": int(n),
        "final_return_updates": k,
        "seed": args.seed,
        "seeds": args.seeds,
        "seeds_per_sec": round(args.seeds / train_s, 2),
        "final_return_per_seed": per_seed,
        "threshold": args.threshold,
        "steps_to_threshold": hit and hit[0],
        "seconds_to_threshold": hit and round(hit[1], 3),
        "single_call": args.single_call,
        "steps_per_update": batch,
        "curve": ({"return_sum": [round(float(x), 3) for x in ret_sum.tolist()],
                   "episodes": [int(x) for x in ep_count.tolist()]}
                  if args.curve and args.seeds == 1 else None),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
