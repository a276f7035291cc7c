"""One rlrig env as a `gymnasium.Env`, for `gymnasium.make("rlrig/...")`."""

from __future__ import annotations

from typing import Any

import numpy as np
import gymnasium as gym

from rlrig import _rlrig
from rlrig._spaces import as_actions, check_seed, space_of


class RlrigEnv(gym.Env):
    """A single rlrig env. Its dynamics are the batched engine's with one env.

    `gymnasium.make` wraps it in `TimeLimit` with the registered limit (or the
    `max_episode_steps` given), which truncates, as for Gymnasium's own envs; envs whose
    limit is not a parameter (the Box2D ones) also keep their own, the same as the
    registered one. `reset(seed=s)` starts the same
    episode as env `k` of a vector env reset with `seed=[..., s (at k), ...]`.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, env_id: str, render_mode: str | None = None, **env_args: Any):
        from rlrig.vector import native_kwargs

        # Gymnasium's TimeLimit (added by gym.make with the registered or requested
        # limit) truncates, as for Gymnasium's own envs.
        self._native = _rlrig.VecEnv(
            env_id, 1, seed=0, autoreset="next_step",
            **native_kwargs(env_id, env_args, num_threads=1, own_limit=False),
        )
        spec = self._native.spec()
        self.env_id = env_id
        self.observation_space = space_of(spec["observation_space"])
        self.action_space = space_of(spec["action_space"])
        self._discrete = spec["action_space"]["kind"] == "discrete"
        self._shape = (1,) if self._discrete else (1, *(self.action_space.shape or ()))
        self._seeded = False
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"{env_id}: render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            seed = check_seed(seed, self.env_id)
        super().reset(seed=seed)
        if seed is None and not self._seeded:
            # Unseeded, as Gymnasium's envs: the first episode comes from a random seed
            # (drawn from np_random, itself seeded from the OS), so copies differ.
            seed = int(self.np_random.integers(0, 2**63))
        if seed is None:
            obs = self._native.reset(mask=np.ones(1, dtype=bool))
        else:
            obs = self._native.reset(seeds=[seed])
        self._seeded = True
        return obs[0], {}

    def step(self, action: Any):
        a = as_actions(action, self._discrete, self.env_id)
        if a.shape != self.action_space.shape:
            raise ValueError(
                f"{self.env_id}: an action must have shape {self.action_space.shape}, got {a.shape}"
            )
        obs, rewards, terminated, truncated, _ = self._native.step(a.reshape(self._shape))
        return obs[0], float(rewards[0]), bool(terminated[0]), bool(truncated[0]), {}

    def render(self):
        """The current frame (`render_mode="rgb_array"`): uint8 `[height, width, 3]`."""
        if self.render_mode is None:
            return None
        return self._native.render(0)

    @property
    def state(self) -> np.ndarray:
        """The internal state, as the reference env's `state` attribute."""
        return np.asarray(self._native.get_state(0))

    def set_state(self, state) -> np.ndarray:
        """Starts an episode from `state`; returns its observation."""
        return self._native.set_state(0, [float(x) for x in state])[0]

    def close(self):
        self._native.close()
