#!/usr/bin/env python3
"""Reference data for rlrig's Atari envs (issue 23), from ale-py 0.11.2 and Gymnasium 1.4.

Usage:  python3 scripts/golden/make_golden_atari.py [OUT_DIR]
Needs:  pip install "gymnasium>=1.4,<1.5" ale-py==0.11.2 opencv-python-headless numpy
        (not needed by CI: the output is committed; the ROMs come with ale-py's wheel)

For each game, episodes of random actions (drawn here from a numpy generator, recorded):
1. raw: `gym.make("ALE/<Game>-v5")` (RGB frames, frameskip 4, sticky actions 0.25),
   `reset(seed=s)`; ALE's own seed (`info["seeds"][1]`) is recorded, which rlrig's
   `Atari::start` takes. Per step: reward, terminated, truncated, lives and a 64-bit FNV-1a
   hash of the RGB frame (the frames themselves would be megabytes).
2. preprocessed: `gym.make("ALE/<Game>-v5", frameskip=1)` wrapped in Gymnasium's
   `AtariPreprocessing(noop_max=30, frame_skip=4, screen_size=84)` and
   `FrameStackObservation(4)`, the reference of rlrig's `<Game>-v5` with
   `fire_reset=false repeat_action_probability=0.25`. The number of no-ops the wrapper drew
   at reset is recorded (recomputed from the env's seed and checked against its generator).
   Per step: reward, flags, lives and the hash of the (4, 84, 84) stack; the first
   episode's first and last stacks are kept whole (base64) to show a difference if any.
"""

import base64
import json
import os
import sys

import ale_py
import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

gym.register_envs(ale_py)

GAMES = ["Pong", "Breakout"]
SEEDS = [1, 2, 3]
STEPS = 300


def fnv1a(b: bytes) -> str:
    h = 0xCBF29CE484222325
    for x in b:
        h ^= x
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def fnv1a_np(a: np.ndarray) -> str:
    # The same hash, vectorised enough to be quick on 100 KB frames.
    return fnv1a(np.ascontiguousarray(a, dtype=np.uint8).tobytes())


def b64(obs):
    return base64.b64encode(np.asarray(obs, dtype=np.uint8).tobytes()).decode()


def play(env, ep, rng):
    """Random actions until the episode ends or STEPS: each step's action, frame hash,
    reward, flags and lives into `ep`. Returns the last observation."""
    n = env.action_space.n
    for _ in range(STEPS):
        a = int(rng.integers(n))
        obs, r, term, trunc, info = env.step(a)
        ep["actions"].append(a)
        ep["steps"].append([fnv1a_np(obs), float(r), bool(term), bool(trunc), int(info["lives"])])
        if term or trunc:
            break
    return obs


def raw_episode(game, seed, rng):
    env = gym.make(f"ALE/{game}-v5")
    obs, info = env.reset(seed=seed)
    ep = {"ale_seed": int(info["seeds"][1]), "first": fnv1a_np(obs), "actions": [], "steps": []}
    play(env, ep, rng)
    env.close()
    return ep


def pre_episode(game, seed, rng, keep):
    base = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.25)
    env = FrameStackObservation(AtariPreprocessing(base, noop_max=30, frame_skip=4, screen_size=84), 4)
    obs, info = env.reset(seed=seed)
    np_seed, ale_seed = (int(x) for x in info["seeds"])
    g, _ = seeding.np_random(np_seed)
    noops = int(g.integers(1, 31))
    # The wrapper drew from the same generator: after one draw both must agree.
    assert g.bit_generator.state == base.unwrapped.np_random.bit_generator.state, "noop draw"
    ep = {"ale_seed": ale_seed, "noops": noops, "first": fnv1a_np(obs), "actions": [], "steps": []}
    if keep:
        ep["first_stack"] = b64(obs)
    last = play(env, ep, rng)
    if keep:
        ep["last_stack"] = b64(last)
    env.close()
    return ep


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "crates/rlrig-env/tests/golden"
    for game in GAMES:
        rng = np.random.default_rng(12345)
        data = {
            "ale_py": ale_py.__version__,
            "gymnasium": gym.__version__,
            "game": game,
            "raw": [raw_episode(game, s, rng) for s in SEEDS],
            "preprocessed": [pre_episode(game, s, rng, k == 0) for k, s in enumerate(SEEDS)],
        }
        path = os.path.join(out, f"Atari-{game}-v5.json")
        with open(path, "w") as f:
            json.dump(data, f, separators=(",", ":"))
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
