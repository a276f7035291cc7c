"""rlrig from Python: the batched env engine as Gymnasium vector envs, EnvPool's
asynchronous API, and the agents rlrig trains.

    import gymnasium as gym
    import rlrig

    envs = gym.make_vec("rlrig/CartPole-v1", num_envs=4096)   # or rlrig.make_vec(...)
    env = gym.make("rlrig/CartPole-v1")
    pool = rlrig.make_async("CartPole-v1", num_envs=64, batch_size=16)
    policy = rlrig.load("runs/CartPole-v1-ppo")
    actions = policy.act(obs)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from rlrig import _rlrig
from rlrig._spaces import gym_id, space_of
from rlrig.env import RlrigEnv
from rlrig.pool import AsyncEnvPool
from rlrig.vector import RlrigVectorEnv, make_vec

__version__ = _rlrig.__version__
__all__ = [
    "AsyncEnvPool",
    "Policy",
    "RlrigEnv",
    "RlrigVectorEnv",
    "env_ids",
    "load",
    "make_async",
    "make_vec",
    "native_id",
    "register_envs",
]


def env_ids() -> list[str]:
    """Every env id rlrig has (as `rlrig envs` lists them)."""
    return list(_rlrig.env_ids())


def native_id(env_id: str) -> str:
    """rlrig's id for `env_id`, which may be Gymnasium's `rlrig/...` form."""
    for k in _rlrig.env_ids():
        if env_id in (k, gym_id(k)):
            return k
    return env_id  # the native module names what is wrong with it


def make_async(env_id: str, num_envs: int, batch_size: int | None = None, **kwargs: Any) -> AsyncEnvPool:
    """EnvPool's `send`/`recv` API (see `rlrig.pool`)."""
    return AsyncEnvPool(native_id(env_id), num_envs, batch_size, **kwargs)


class Policy:
    """The greedy policy of a run's newest checkpoint: the actions `rlrig eval` takes."""

    def __init__(self, run_dir: str | Path):
        self._native = _rlrig.Policy(str(run_dir))
        spec = self._native.spec()
        self.run_dir = Path(run_dir)
        self.env_id: str = self._native.env_id
        self.env_args: dict[str, str] = dict(self._native.env_args)
        self.observation_space = space_of(spec["observation_space"])
        self.action_space = space_of(spec["action_space"])

    def act(self, obs: Any, deterministic: bool = True) -> np.ndarray:
        """Actions for a batch of observations (`[n, *obs_shape]`), or for one
        observation (then one action). rlrig's policies act greedily here (the
        arg-max, the deterministic actor, the Gaussian's mean)."""
        if not deterministic:
            raise ValueError(
                "rlrig.Policy.act samples no actions: it gives the greedy actions rlrig eval "
                "takes (deterministic=True)"
            )
        o = np.ascontiguousarray(obs, dtype=np.float32)
        single = o.shape == self.observation_space.shape
        a = self._native.act(o[None] if single else o)
        return a[0] if single else a

    def __repr__(self) -> str:
        return f"Policy({self.env_id}, run_dir={str(self.run_dir)!r})"


def load(run_dir: str | Path) -> Policy:
    """The trained policy in `run_dir` (written by `rlrig train` or `rlrig.train`)."""
    return Policy(run_dir)


def register_envs() -> None:
    """Registers every rlrig env with Gymnasium as `rlrig/<id>` (done on import)."""
    import gymnasium as gym

    for k in _rlrig.env_ids():
        gid = gym_id(k)
        if gid in gym.registry:
            continue
        gym.register(
            id=gid,
            entry_point="rlrig.env:RlrigEnv",
            vector_entry_point="rlrig.vector:_vector_entry_point",
            max_episode_steps=_rlrig.spec(k)["max_episode_steps"],
            kwargs={"env_id": k},
        )


register_envs()
