"""Pieces the learning peers (dqn_sb3.py, sac_sb3.py, sac_jax.py, ppo_jax.py and
run_minatar.sh's table) share, so that they measure the same way. Imported from the script's own folder, which Python puts first on
sys.path; it needs nothing beyond the standard library.
"""
import time


def greedy_returns(env, act, seeds):
    """The return of one greedy episode per seed: `env.reset(seed=seed)`, then
    `act(obs)` until the episode terminates or is truncated."""
    rets = []
    for seed in seeds:
        o, _ = env.reset(seed=seed)
        tot, done = 0.0, False
        while not done:
            o, r, term, trunc, _ = env.step(act(o))
            tot += r
            done = term or trunc
        rets.append(tot)
    return rets


def time_updates(model):
    """Wraps an SB3 off-policy model's `train` to count the seconds spent in it and the
    gradient steps it took: returns [seconds, updates], which grows as the model learns."""
    spent = [0.0, 0]
    train = model.train

    def timed(gradient_steps, batch_size=64):
        t = time.time()
        train(gradient_steps=gradient_steps, batch_size=batch_size)
        spent[0] += time.time() - t
        spent[1] += gradient_steps

    model.train = timed
    return spent


def update_fields(spent):
    """The result fields of a `time_updates` counter: update_seconds, updates and
    updates_per_sec (None before the first update)."""
    seconds, updates = spent
    return dict(update_seconds=round(seconds, 3), updates=updates,
                updates_per_sec=round(updates / seconds, 1) if seconds else None)


def crossing(return_sums, episode_counts, threshold, window=20):
    """The first update after which the mean return of the last `window` finished
    episodes reaches `threshold` (an update's episodes pooled, rlrig's `bench learn`
    rule), from each update's finished-episode return sum and count; None if never."""
    rows, n, total = [], 0, 0.0
    for u, (r, c) in enumerate(zip(return_sums, episode_counts)):
        if c <= 0:
            continue
        rows.append((c, r))
        n, total = n + c, total + r
        while len(rows) > 1 and n - rows[0][0] >= window:
            c0, r0 = rows.pop(0)
            n, total = n - c0, total - r0
        if n >= window and total / n >= threshold:
            return u
    return None
