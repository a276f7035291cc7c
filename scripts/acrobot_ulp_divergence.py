"""How far do 1-ulp differences in sin/cos carry Gymnasium's Acrobot-v1?

Runs 20 random-action episodes of Gymnasium's Acrobot twice, the second time with
every sin/cos result moved one ulp up or down at random (or left alone), and prints
each episode's largest relative observation difference and the first step where it
exceeds the golden tests' tolerance (1e-6 relative and 1e-9 absolute). This is the
evidence behind README's note on Acrobot's opt-in `fast_trig`: rlrig's fast sin/cos
(within 1 ulp of libm) changes the last bits, and Acrobot is chaotic.

    python3 scripts/acrobot_ulp_divergence.py      # needs gymnasium and numpy

Measured 2026-11-23 (Gymnasium 1.4.0, NumPy 2.4.6): 19 of 20 episodes stay within
1e-6 (most with float32-identical observations, the rest within ~5e-7); seed 13 leaves
it at step 439 (1e-4 by the end).
"""

import gymnasium as gym
import numpy as np
import gymnasium.envs.classic_control.acrobot as acrobot

SIN, COS = acrobot.sin, acrobot.cos
rng = np.random.default_rng(1)


def nudged(f):
    def g(x):
        y = f(x)
        d = rng.integers(-1, 2)
        return np.nextafter(y, d * np.inf) if d else y
    return g


def episode(seed, actions, nudge):
    acrobot.sin, acrobot.cos = (nudged(SIN), nudged(COS)) if nudge else (SIN, COS)
    env = gym.make("Acrobot-v1")
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for a in actions:
        obs, _, term, trunc, _ = env.step(a)
        out.append(obs)
        if term or trunc:
            break
    return np.array(out, dtype=np.float64)


def main():
    for seed in range(20):
        actions = np.random.default_rng(100 + seed).integers(0, 3, 500)
        a, b = episode(seed, actions, False), episode(seed, actions, True)
        n = min(len(a), len(b))
        diff = np.abs(a[:n] - b[:n])
        rel = diff / np.maximum(np.abs(a[:n]), 1e-3)
        bad = np.where((diff > 1e-9) & (rel > 1e-6))[0]
        first = int(bad[0]) if len(bad) else None
        print(f"seed {seed:2d}: {len(a)} vs {len(b)} observations, "
              f"largest relative difference {rel.max():.2e}, first beyond 1e-6: {first}")


if __name__ == "__main__":
    main()
