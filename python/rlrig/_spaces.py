"""Gymnasium spaces and action arrays from the native module's descriptions."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces


def space_of(d: dict[str, Any]) -> spaces.Space:
    """The `gymnasium.spaces` object for a space dict of the native module."""
    if d["kind"] == "discrete":
        return spaces.Discrete(int(d["n"]))
    shape = tuple(int(x) for x in d["shape"])
    return spaces.Box(
        low=np.asarray(d["low"]).reshape(shape),
        high=np.asarray(d["high"]).reshape(shape),
        shape=shape,
        dtype=np.dtype(d["dtype"]),
    )


def gym_id(env_id: str) -> str:
    """The id rlrig registers `env_id` under with Gymnasium (one namespace, `rlrig/`)."""
    return "rlrig/" + env_id.replace("/", "-")


# Per action space: its name, the dtypes the native step takes as they are (any other
# dtype of the kinds listed is converted to the first) and what the actions must be.
_DISCRETE_ACTIONS = ("Discrete", (np.dtype(np.int64), np.dtype(np.int32)), "iu", "integers")
_BOX_ACTIONS = ("Box", (np.dtype(np.float32), np.dtype(np.float64)), "fiu", "real numbers")


def as_actions(actions: Any, discrete: bool, env_id: str) -> np.ndarray:
    """`actions` as an array of the dtype the native step takes without copying
    twice: int64/int32 for Discrete spaces, float32/float64 for Box spaces. Anything
    that is not a number of the right kind is a `TypeError` naming the env."""
    a = actions if isinstance(actions, np.ndarray) else np.asarray(actions)
    space, native, convertible, what = _DISCRETE_ACTIONS if discrete else _BOX_ACTIONS
    if a.dtype in native:
        return a
    if a.dtype.kind in convertible:
        return a.astype(native[0])
    raise TypeError(
        f"{env_id}: actions for a {space} space must be {what}, got an array of dtype {a.dtype}"
    )


def check_seed(seed: Any, env_id: str) -> int:
    """`seed` as a non-negative integer below 2**64, or a ValueError naming it."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{env_id}: a seed must be an integer, got {seed!r}")
    if not 0 <= int(seed) < 2**64:
        raise ValueError(f"{env_id}: a seed must be in [0, 2**64), got {seed}")
    return int(seed)

