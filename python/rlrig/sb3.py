"""Stable-Baselines3's `VecEnv` over rlrig's executor.

SB3 does not take Gymnasium vector envs: it wants its own `VecEnv`, with same-step
autoreset, `infos[i]["terminal_observation"]` and `infos[i]["TimeLimit.truncated"]`,
float32 rewards and one `dones` array. `make_sb3_vec_env` builds one (SB3 is imported
only here, so the package does not depend on it):

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    import rlrig.sb3

    env = VecMonitor(rlrig.sb3.make_sb3_vec_env("CartPole-v1", num_envs=8, seed=0))
    PPO("MlpPolicy", env).learn(100_000)
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rlrig import _rlrig, native_id
from rlrig._spaces import as_actions, check_seed, space_of


def make_sb3_vec_env(env_id: str, num_envs: int, *, seed: int = 0, num_threads: int | None = None,
                     **env_args: Any):
    """An SB3 `VecEnv` of `num_envs` rlrig `env_id` envs (keyword args: env params)."""
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv

    from rlrig.vector import native_kwargs

    class RlrigSB3VecEnv(VecEnv):
        def __init__(self) -> None:
            eid = native_id(env_id)
            self.env_id = eid
            self._native = _rlrig.VecEnv(
                eid, int(num_envs), seed=check_seed(seed, eid), autoreset="same_step",
                **native_kwargs(eid, env_args, num_threads=num_threads),
            )
            spec = self._native.spec()
            self._discrete = spec["action_space"]["kind"] == "discrete"
            self.render_mode = None  # SB3 asks every env through get_attr
            super().__init__(int(num_envs), space_of(spec["observation_space"]),
                             space_of(spec["action_space"]))
            self._actions: np.ndarray | None = None
            self._base_seed = int(seed)

        def reset(self):
            seeds = [s for s in self._seeds]
            if any(s is not None for s in seeds):
                obs = self._native.reset(seeds=[None if s is None else int(s) for s in seeds])
            else:
                obs = self._native.reset()
            self._reset_seeds()
            self._reset_options()
            return obs

        def step_async(self, actions: np.ndarray) -> None:
            a = as_actions(actions, self._discrete, self.env_id)
            if self._discrete:
                a = a.reshape(self.num_envs)
            self._actions = a

        def step_wait(self):
            assert self._actions is not None, "step_async first"
            obs, rew, term, trunc, final_obs = self._native.step(self._actions)
            dones = term | trunc
            infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
            for i in np.flatnonzero(dones):
                assert final_obs is not None
                infos[i]["terminal_observation"] = final_obs[i]
                infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
            return obs, rew.astype(np.float32), dones, infos

        def close(self) -> None:
            self._native.close()

        def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
            return [getattr(self, attr_name)] * len(self._indices(indices))

        def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
            setattr(self, attr_name, value)

        def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
            raise AttributeError(f"{self.env_id}: rlrig's SB3 adapter has no per-env method {method_name!r}")

        def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
            return [False] * len(self._indices(indices))

        def _indices(self, indices: Any) -> Sequence[int]:
            if indices is None:
                return range(self.num_envs)
            if isinstance(indices, int):
                return [indices]
            return list(indices)

    return RlrigSB3VecEnv()
