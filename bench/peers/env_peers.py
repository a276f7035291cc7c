#!/usr/bin/env python3
"""Step-throughput of peer environment libraries, in the shape of `rlrig bench env --json`.

    python env_peers.py --peer P --env ID --num-envs N --threads T [--steps S | --target-seconds X]

prints ONE JSON line with the keys rlrig prints (env, num_envs, threads, mode,
batch_size, steps, seconds, steps_per_sec, steps_per_sec_per_thread) plus
"peer" and "version". `steps` counts env steps over all envs (N per batch
step); S is rounded up to whole batches. Without --steps (or with --steps 0)
the number of batch steps is chosen from a short warm-up so that the timed part
takes about --target-seconds (default 2).

Only the stepping loop is timed: construction, reset, action generation (for
the numpy-based peers) and JIT compilation (gymnax) are outside the clock.

Exit status 2 (message on stderr, no JSON) means the peer does not support
that env, or the peer is not installed.

Must stay runnable on Python 3.8: the operant peer runs in bench/peers/.venv-operant
(operant ships only cp38 Linux wheels); `--peer operant` re-executes this script
with that interpreter when operant is not importable here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENVS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1",
        "MinAtar/Asterix-v1", "MinAtar/Breakout-v1", "MinAtar/Freeway-v1", "MinAtar/Seaquest-v1",
        "MinAtar/SpaceInvaders-v1", "LunarLander-v3", "LunarLanderContinuous-v3", "BipedalWalker-v3",
        "BipedalWalkerHardcore-v3",
        # Atari with the standard preprocessing (rlrig's `atari` feature): EnvPool's ids.
        "Pong-v5", "Breakout-v5"]
MINATAR = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
# gymnax and pgx name the MinAtar games differently.
GYMNAX_IDS = {f"MinAtar/{g}-v1": f"{g}-MinAtar" for g in MINATAR}
PEERS = ["gymnasium-sync", "gymnasium-numpy", "envpool", "envpool-async", "gymnax", "pgx", "operant",
         "ale-vector"]
ACTION_POOL = 64  # pre-generated action batches, cycled (power of two)
WARMUP_SECONDS = 0.3


class Unsupported(Exception):
    pass


def pkg_version(name: str) -> str:
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        mod = sys.modules.get(name)
        return getattr(mod, "__version__", "?")


# --------------------------------------------------------------------------
# numpy-driven peers: they expose `step(actions)` on a batch; we time a Python
# loop over pre-generated action batches.
# --------------------------------------------------------------------------


def action_pool(np, space_kind, n_actions, low, high, shape, num_envs, dtype, seed=0):
    """ACTION_POOL batches of uniformly random actions, shape (POOL, num_envs, *shape)."""
    rng = np.random.default_rng(seed)
    if space_kind == "discrete":
        return rng.integers(0, n_actions, size=(ACTION_POOL, num_envs), dtype=np.int64).astype(dtype)
    full = (ACTION_POOL, num_envs) + tuple(shape)
    return rng.uniform(low, high, size=full).astype(dtype)


def time_loop(step, pool, iters):
    mask = len(pool) - 1
    t0 = time.perf_counter()
    for i in range(iters):
        step(pool[i & mask])
    return time.perf_counter() - t0


def calibrate_and_run(step, pool, iters, target_seconds):
    """Warm up (untimed), pick iters if not given, then time `iters` batch steps."""
    n, spent = 1, 0.0
    while True:
        spent = time_loop(step, pool, n)
        if spent >= WARMUP_SECONDS or (iters and n >= iters):
            break
        n *= 2
    if not iters:
        iters = max(1, int(math.ceil(target_seconds * n / max(spent, 1e-9))))
    return iters, time_loop(step, pool, iters)


def gym_space_info(np, space):
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return dict(space_kind="discrete", n_actions=int(space.n), low=0, high=0, shape=())
    return dict(space_kind="box", n_actions=0, low=np.asarray(space.low), high=np.asarray(space.high),
                shape=space.shape)


def time_env_step(np, env, space, int_dtype, args):
    """Times `env.step` on random actions for the Gymnasium `space` (of `int_dtype` if it is
    Discrete, else float32) as calibrate_and_run does, then closes env: (iters, seconds)."""
    info = gym_space_info(np, space)
    dtype = int_dtype if info["space_kind"] == "discrete" else np.float32
    pool = action_pool(np, num_envs=args.num_envs, dtype=dtype, **info)
    iters, seconds = calibrate_and_run(env.step, pool, args.iters, args.target_seconds)
    env.close()
    return iters, seconds


def run_gymnasium(args, vectorized):
    import numpy as np
    import gymnasium as gym

    mode = "vector_entry_point" if vectorized else "sync"
    if vectorized and gym.spec(args.env).vector_entry_point is None:
        raise Unsupported(f"gymnasium has no vector entry point (numpy-vectorised env) for {args.env}")
    env = gym.make_vec(args.env, num_envs=args.num_envs, vectorization_mode=mode)
    env.reset(seed=0)
    iters, seconds = time_env_step(np, env, env.single_action_space, np.int64, args)
    return dict(threads=1, mode="sync", iters=iters, seconds=seconds,
                version=f"gymnasium {pkg_version('gymnasium')}",
                note="Python loop, single-threaded" + ("; numpy-vectorised CartPoleVectorEnv" if vectorized
                                                       else "; SyncVectorEnv of Python envs"))


def run_envpool(args):
    import numpy as np
    import envpool

    if args.env not in envpool.list_all_envs():
        raise Unsupported(f"envpool has no {args.env}")
    env = envpool.make(args.env, env_type="gymnasium", num_envs=args.num_envs,
                       batch_size=args.num_envs, num_threads=args.threads, seed=0)
    env.reset()
    iters, seconds = time_env_step(np, env, env.action_space, np.int32, args)
    return dict(threads=args.threads, mode="sync", iters=iters, seconds=seconds,
                version=f"envpool {pkg_version('envpool')}",
                note="env.step(actions) with batch_size=num_envs; C++ thread pool of num_threads")


def run_envpool_async(args):
    """EnvPool's asynchronous mode: recv() the first batch_size envs, send() their actions."""
    import numpy as np
    import envpool

    if args.env not in envpool.list_all_envs():
        raise Unsupported(f"envpool has no {args.env}")
    bs = args.batch_size or max(1, args.num_envs // 2)
    env = envpool.make(args.env, env_type="gymnasium", num_envs=args.num_envs,
                       batch_size=bs, num_threads=args.threads, seed=0)
    env.async_reset()
    info = gym_space_info(np, env.action_space)
    dtype = np.int32 if info["space_kind"] == "discrete" else np.float32
    pool = action_pool(np, num_envs=bs, dtype=dtype, **info)

    def step(actions):
        _, _, _, _, inf = env.recv()
        env.send(actions, inf["env_id"])

    iters = int(math.ceil(args.steps / bs)) if args.steps > 0 else 0
    iters, seconds = calibrate_and_run(step, pool, iters, args.target_seconds)
    env.close()
    return dict(threads=args.threads, mode="async", iters=iters, seconds=seconds, batch_size=bs,
                version=f"envpool {pkg_version('envpool')}",
                note="recv()/send(actions, env_id) with batch_size < num_envs; C++ thread pool of num_threads")


def run_ale_vector(args):
    """ale-py's own vector env (C++ thread pool, EnvPool's preprocessing and defaults)."""
    import numpy as np
    from ale_py.vector_env import AtariVectorEnv

    if not args.env.endswith("-v5") or "/" in args.env:
        raise Unsupported(f"ale-vector runs the preprocessed Atari ids, not {args.env}")
    game = re.sub(r"(?<!^)(?=[A-Z])", "_", args.env[: -len("-v5")]).lower()
    env = AtariVectorEnv(game, num_envs=args.num_envs, num_threads=args.threads, reward_clipping=False)
    env.reset(seed=0)
    iters, seconds = time_env_step(np, env, env.single_action_space, np.int64, args)  # Atari: Discrete
    return dict(threads=args.threads, mode="sync", iters=iters, seconds=seconds,
                version=f"ale-py {pkg_version('ale-py')}",
                note="ale_py.vector_env.AtariVectorEnv.step, batch = num_envs, num_threads threads")


def run_operant(args):
    import numpy as np
    from operant.envs import CartPoleVecEnv, MountainCarVecEnv, PendulumVecEnv

    makers = {"CartPole-v1": (CartPoleVecEnv, 2), "MountainCar-v0": (MountainCarVecEnv, 3),
              "Pendulum-v1": (PendulumVecEnv, None)}
    if args.env not in makers:
        raise Unsupported(f"operant has no {args.env} (it has {', '.join(makers)})")
    make, n_actions = makers[args.env]
    env = make(args.num_envs, workers=args.threads)
    env.reset(seed=0)
    if n_actions is not None:
        pool = action_pool(np, "discrete", n_actions, 0, 0, (), args.num_envs, np.int32)
    else:  # operant's Pendulum takes a flat (num_envs,) float32 torque array
        pool = action_pool(np, "box", 0, -2.0, 2.0, (), args.num_envs, np.float32)
    iters, seconds = calibrate_and_run(env.step, pool, args.iters, args.target_seconds)
    return dict(threads=args.threads, mode="sync", iters=iters, seconds=seconds,
                version=f"operant {pkg_version('operant')} (Python {sys.version_info[0]}.{sys.version_info[1]},"
                        f" numpy {np.__version__})",
                note="operant.envs.*VecEnv(num_envs, workers=threads).step(actions)")


# --------------------------------------------------------------------------
# gymnax: vmap over envs, lax.scan over steps, all under jit.
# --------------------------------------------------------------------------


def jit_scan(jax, body):
    """`rollout(carry, length)`: `length` steps of `body` under one jit(lax.scan), returning the
    last carry (`length` is static: one compile per length)."""

    def rollout(carry, length):
        carry, _ = jax.lax.scan(body, carry, None, length=length)
        return carry

    return jax.jit(rollout, static_argnames=("length",))


def timed_scan(jax, rollout, carry, args):
    """Times one compiled `rollout(carry, length=iters)` scan (the JAX peers): `iters` from
    `--iters`, else calibrated on short scans to fill `--target-seconds`; compile excluded.
    Returns (iters, seconds)."""
    iters = args.iters
    if not iters:
        probe = 512  # short scans (~64) run faster per step than long ones; stay long-ish
        # compile + first runs; the second call can recompile once when the returned
        # carry's (weak) dtypes differ from the initial carry's
        c = carry
        for _ in range(3):
            c = jax.block_until_ready(rollout(c, length=probe))
        calls, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < WARMUP_SECONDS:
            c = jax.block_until_ready(rollout(c, length=probe))
            calls += 1
        per_iter = (time.perf_counter() - t0) / (calls * probe)
        iters = max(1, int(math.ceil(args.target_seconds / per_iter)))
    compiled = rollout.lower(carry, length=iters).compile()  # compile outside the clock
    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(carry))
    seconds = time.perf_counter() - t0
    del out
    return iters, seconds


def xla_note(args):
    return "compile excluded; " + ("XLA intra-op threads limited to 1" if args.threads == 1
                                   else "XLA may use all cores")


def run_gymnax(args):
    import jax
    import jax.numpy as jnp
    import gymnax

    gid = GYMNAX_IDS.get(args.env, args.env)
    if gid not in gymnax.registered_envs:
        raise Unsupported(f"gymnax has no {args.env}")
    env, params = gymnax.make(gid)
    space = env.action_space(params)
    n = args.num_envs
    if hasattr(space, "n"):
        n_actions = int(space.n)

        def sample(key):
            return jax.random.randint(key, (n,), 0, n_actions)
    else:
        low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32), space.shape)
        high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32), space.shape)

        def sample(key):
            return jax.random.uniform(key, (n,) + tuple(space.shape), jnp.float32, low, high)

    v_reset = jax.vmap(env.reset, in_axes=(0, None))
    v_step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def body(carry, _):
        key, state, ret, dones = carry
        key, k_act, k_step = jax.random.split(key, 3)
        actions = sample(k_act)
        obs, state, reward, term, trunc, _info = v_step(jax.random.split(k_step, n), state, actions, params)
        # Consume the whole observation: XLA would otherwise drop its computation, and
        # rlrig writes every observation in full (as a learner needs them).
        ret = ret + reward.sum() + obs.astype(jnp.float32).sum()
        return (key, state, ret, dones + jnp.logical_or(term, trunc).sum()), None

    rollout = jit_scan(jax, body)

    key = jax.random.PRNGKey(0)
    key, k0 = jax.random.split(key)
    _obs, state = v_reset(jax.random.split(k0, n), params)
    carry = (key, state, jnp.float32(0), jnp.int32(0))
    carry = jax.block_until_ready(carry)

    iters, seconds = timed_scan(jax, rollout, carry, args)
    return dict(threads=args.threads, mode="sync", iters=iters, seconds=seconds,
                version=f"gymnax {pkg_version('gymnax')}, jax {jax.__version__} ({jax.default_backend()})",
                note="jit(lax.scan(vmap(env.step))), actions from jax.random inside the scan, full observation consumed; "
                     + xla_note(args))


# --------------------------------------------------------------------------
# pgx (MinAtar only): vmap over envs, lax.scan over steps, under jit; pgx's
# experimental auto_reset wrapper (pgx games never truncate).
# --------------------------------------------------------------------------

PGX_IDS = {"MinAtar/Asterix-v1": "minatar-asterix", "MinAtar/Breakout-v1": "minatar-breakout",
           "MinAtar/Freeway-v1": "minatar-freeway", "MinAtar/Seaquest-v1": "minatar-seaquest",
           "MinAtar/SpaceInvaders-v1": "minatar-space_invaders"}


def run_pgx(args):
    import jax
    import jax.numpy as jnp
    import pgx
    from pgx.experimental import auto_reset

    if args.env not in PGX_IDS:
        raise Unsupported(f"pgx has no {args.env}")
    env = pgx.make(PGX_IDS[args.env])
    n = args.num_envs
    n_actions = env.num_actions
    init = jax.vmap(env.init)
    step = jax.vmap(auto_reset(env.step, env.init))

    def body(carry, _):
        key, state, ret, dones = carry
        key, k_act, k_step = jax.random.split(key, 3)
        actions = jax.random.randint(k_act, (n,), 0, n_actions)
        state = step(state, actions, jax.random.split(k_step, n))
        # Consume the whole observation, reward and done so XLA cannot drop them (rlrig
        # writes every observation in full).
        ret = ret + state.rewards.sum() + state.observation.astype(jnp.float32).sum()
        return (key, state, ret, dones + state.terminated.sum()), None

    rollout = jit_scan(jax, body)
    key = jax.random.PRNGKey(0)
    key, k0 = jax.random.split(key)
    state = init(jax.random.split(k0, n))
    carry = jax.block_until_ready((key, state, jnp.float32(0), jnp.int32(0)))
    iters, seconds = timed_scan(jax, rollout, carry, args)
    return dict(threads=args.threads, mode="sync", iters=iters, seconds=seconds,
                version=f"pgx {pkg_version('pgx')}, jax {jax.__version__} ({jax.default_backend()})",
                note="jit(lax.scan(vmap(auto_reset(env.step)))), sticky actions 0.1, full observation consumed; "
                     + xla_note(args))


# --------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", required=True, choices=PEERS)
    ap.add_argument("--env", default="CartPole-v1", choices=ENVS)
    ap.add_argument("--num-envs", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0,
                    help="total env steps, all envs together (rounded up to whole batches); 0 = auto")
    ap.add_argument("--batch-size", type=int, default=0,
                    help="envpool-async: envs per recv() (default num_envs / 2, as rlrig bench env)")
    ap.add_argument("--target-seconds", type=float, default=2.0,
                    help="with --steps 0: aim the timed loop at this many seconds")
    args = ap.parse_args(argv)
    if args.num_envs < 1 or args.threads < 1:
        ap.error("--num-envs and --threads must be >= 1")
    args.iters = int(math.ceil(args.steps / args.num_envs)) if args.steps > 0 else 0

    if args.peer in ("gymnax", "pgx"):
        # Must be set before jax is imported. One host device; with --threads 1
        # also keep XLA's CPU intra-op parallelism to a single thread.
        flags = os.environ.get("XLA_FLAGS", "").split()
        flags.append("--xla_force_host_platform_device_count=1")
        if args.threads == 1:
            flags += ["--xla_cpu_multi_thread_eigen=false", "intra_op_parallelism_threads=1"]
        os.environ["XLA_FLAGS"] = " ".join(flags)
        os.environ.setdefault("JAX_PLATFORMS", "cpu")

    if args.peer == "operant":
        try:
            import operant  # noqa: F401
        except ImportError:
            alt = os.path.join(HERE, ".venv-operant", "bin", "python")
            if os.path.exists(alt) and os.path.realpath(sys.executable) != os.path.realpath(alt):
                os.execv(alt, [alt, os.path.abspath(__file__)] + list(sys.argv[1:] if argv is None else argv))

    runners = {
        "gymnasium-sync": lambda: run_gymnasium(args, vectorized=False),
        "gymnasium-numpy": lambda: run_gymnasium(args, vectorized=True),
        "envpool": lambda: run_envpool(args),
        "envpool-async": lambda: run_envpool_async(args),
        "gymnax": lambda: run_gymnax(args),
        "pgx": lambda: run_pgx(args),
        "operant": lambda: run_operant(args),
        "ale-vector": lambda: run_ale_vector(args),
    }
    try:
        r = runners[args.peer]()
    except Unsupported as e:
        print(f"env_peers: {args.peer}: unsupported: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"env_peers: {args.peer}: not installed ({e}); run bench/peers/setup.sh", file=sys.stderr)
        return 2

    batch = r.get("batch_size", args.num_envs)
    steps = r["iters"] * batch
    sps = steps / r["seconds"]
    out = {
        "env": args.env,
        "num_envs": args.num_envs,
        "threads": r["threads"],
        "mode": r["mode"],
        "batch_size": batch,
        "steps": steps,
        "seconds": r["seconds"],
        "steps_per_sec": sps,
        "steps_per_sec_per_thread": sps / r["threads"],
        "peer": args.peer,
        "version": r["version"],
        "note": r["note"],
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
