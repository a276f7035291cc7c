"""EnvPool's asynchronous API over rlrig's asynchronous executor.

    env = rlrig.make_async("CartPole-v1", num_envs=64, batch_size=16)
    env.async_reset()
    while True:
        obs, rew, term, trunc, info = env.recv()
        env.send(policy(obs), info["env_id"])

`recv` returns the first `batch_size` envs to finish; `send` takes one action per env
of `env_ids`. Each env's trajectory equals the synchronous executor's given the same
actions; which envs share a batch depends on timing (not deterministic).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlrig import _rlrig
from rlrig._spaces import as_actions, check_seed, space_of


class AsyncEnvPool:
    def __init__(
        self,
        env_id: str,
        num_envs: int,
        batch_size: int | None = None,
        *,
        num_threads: int | None = None,
        seed: int = 0,
        autoreset_mode: str = "next_step",
        max_episode_steps: int | None = None,
        **env_args: Any,
    ):
        from rlrig.vector import native_kwargs

        self.env_id = env_id
        self.num_envs = int(num_envs)
        self.batch_size = self.num_envs if batch_size is None else int(batch_size)
        self._native = _rlrig.AsyncVecEnv(
            env_id,
            self.num_envs,
            self.batch_size,
            seed=check_seed(seed, env_id),
            autoreset=str(getattr(autoreset_mode, "value", autoreset_mode)).lower().replace("-", "_"),
            **native_kwargs(env_id, env_args, num_threads=num_threads,
                            max_episode_steps=max_episode_steps),
        )
        spec = self._native.spec()
        # EnvPool's spaces are those of one env.
        self.observation_space = space_of(spec["observation_space"])
        self.action_space = space_of(spec["action_space"])
        self._discrete = spec["action_space"]["kind"] == "discrete"
        self._all = np.arange(self.num_envs, dtype=np.int64)

    def async_reset(self) -> None:
        """Resets every env; their first observations arrive through `recv`."""
        self._native.async_reset()

    def send(self, actions: Any, env_ids: Any = None) -> None:
        ids = self._all if env_ids is None else np.asarray(env_ids)
        self._native.send(as_actions(actions, self._discrete, self.env_id), ids)

    def recv(self):
        obs, rew, term, trunc, ids, final_obs = self._native.recv()
        info: dict[str, np.ndarray] = {"env_id": ids}
        if final_obs is not None:
            info["final_obs"] = final_obs
        return obs, rew, term, trunc, info

    def reset(self, env_ids: Any = None):
        """Synchronous use (EnvPool's `reset`): resets every env and waits for all."""
        if env_ids is not None:
            raise ValueError(
                f"{self.env_id}: reset(env_ids) of some envs is not supported; reset() resets all "
                "(ended envs reset themselves on their next step)"
            )
        if self.batch_size != self.num_envs:
            raise ValueError(
                f"{self.env_id}: reset() waits for all envs; with batch_size "
                f"{self.batch_size} < num_envs {self.num_envs} use async_reset() and recv()"
            )
        self.async_reset()
        obs, _, _, _, info = self.recv()
        order = np.argsort(info["env_id"])
        return obs[order], {"env_id": info["env_id"][order]}

    def step(self, actions: Any, env_ids: Any = None):
        """`send` then `recv`, as EnvPool's `step`."""
        self.send(actions, env_ids)
        return self.recv()

    def close(self) -> None:
        self._native.close()
