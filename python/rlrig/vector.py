"""Gymnasium vector envs over rlrig's batched executor.

`RlrigVectorEnv` follows `gymnasium.vector.VectorEnv`'s contract (spaces, the three
autoreset modes, `reset(seed=, options=)`, infos with masks) and steps every env in
one native call that releases the GIL and splits the batch over `num_threads` cores.
"""

from __future__ import annotations

import os
import secrets
from typing import Any, Sequence

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlrig import _rlrig
from rlrig._spaces import as_actions, check_seed, space_of

_MODES = {
    AutoresetMode.NEXT_STEP: "next_step",
    AutoresetMode.SAME_STEP: "same_step",
    # Disabled: the executor runs in next-step mode and refuses to step an env whose
    # episode ended until `reset(options={"reset_mask": ...})` resets it.
    AutoresetMode.DISABLED: "next_step",
}


def default_threads() -> int:
    """Every core this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def native_kwargs(
    env_id: str,
    env_args: dict[str, Any],
    *,
    num_threads: int | None = None,
    max_episode_steps: int | None = None,
    own_limit: bool = True,
) -> dict[str, Any]:
    """The keyword arguments every native executor takes (`num_threads`,
    `episode_cap`, `env_args`), from the Python-side options. A requested time limit
    goes to the env's `max_episode_steps` parameter where it has one, to the
    executor's episode cap where it has no limit (the MinAtar games), and is an error
    where the limit is fixed. `own_limit=False` turns the env's own limit off where it
    is a parameter, for a wrapper (Gymnasium's `TimeLimit`) that truncates instead."""
    spec = _rlrig.spec(env_id, env_args or None)
    env_args = dict(env_args)
    cap = None
    limit = spec["max_episode_steps"]
    if not own_limit and "max_episode_steps" in spec["params"] and "max_episode_steps" not in env_args:
        env_args["max_episode_steps"] = 2**32 - 1
    elif max_episode_steps is not None and max_episode_steps != limit:
        if "max_episode_steps" in spec["params"]:
            env_args["max_episode_steps"] = int(max_episode_steps)
        elif limit is None:
            cap = int(max_episode_steps)
        else:
            raise ValueError(
                f"{env_id}: its time limit is {limit} steps and cannot be "
                f"changed, got max_episode_steps={max_episode_steps}"
            )
    return {
        "num_threads": default_threads() if num_threads is None else int(num_threads),
        "episode_cap": cap,
        "env_args": env_args or None,
    }


class RlrigVectorEnv(VectorEnv):
    """`num_envs` copies of an rlrig env, stepped together.

    Observations, rewards (float64) and flags (bool) come back as fresh numpy arrays
    on every call. For a loop that allocates nothing, pass your own arrays to
    `step_into`: rlrig writes into them in place and never keeps a reference, so they
    stay yours to read and reuse after the call returns.

    Seeding: `reset(seed=s)` gives env `k` the random stream `(s, k)`, so the batch is
    the same for every `num_threads`; `reset(seed=[s0, s1, ...])` gives env `k` the
    episode a single `gymnasium.make("rlrig/...")` env reset with `seed=s_k` starts.
    `seed=None` at construction draws a random seed (as Gymnasium does).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        num_threads: int | None = None,
        seed: int | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
        **env_args: Any,
    ):
        mode = AutoresetMode(autoreset_mode)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"{env_id}: render_mode must be None or 'rgb_array', got {render_mode!r}")
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"{env_id}: num_envs must be a positive integer, got {num_envs!r}")
        self._seed = secrets.randbits(63) if seed is None else check_seed(seed, env_id)
        self._native = _rlrig.VecEnv(
            env_id,
            int(num_envs),
            seed=self._seed,
            autoreset=_MODES[mode],
            strict=mode == AutoresetMode.DISABLED,
            **native_kwargs(env_id, env_args, num_threads=num_threads,
                            max_episode_steps=max_episode_steps),
        )
        spec = self._native.spec()
        self.env_id = env_id
        self.num_envs = int(num_envs)
        self.single_observation_space = space_of(spec["observation_space"])
        self.single_action_space = space_of(spec["action_space"])
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._discrete = spec["action_space"]["kind"] == "discrete"
        self.metadata = {"autoreset_mode": mode, "render_modes": ["rgb_array"]}
        self.render_mode = render_mode
        self.max_episode_steps = max_episode_steps or spec["max_episode_steps"]
        self._same_step = mode == AutoresetMode.SAME_STEP
        self._started = False

    @property
    def num_threads(self) -> int:
        """Threads the executor steps on (small batches use fewer than asked)."""
        return self._native.threads_used

    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[np.ndarray, dict[str, Any]]:
        mask = None
        if options is not None and "reset_mask" in options:
            mask = options["reset_mask"]
            if not isinstance(mask, np.ndarray):
                raise TypeError(
                    f"`options['reset_mask']` must be a numpy array, got {type(mask)}"
                )
            if mask.shape != (self.num_envs,):
                raise ValueError(
                    f"`options['reset_mask']` must have shape `({self.num_envs},)`, got {mask.shape}"
                )
            if mask.dtype != np.bool_:
                raise TypeError(
                    f"`options['reset_mask']` must have `dtype=np.bool_`, got {mask.dtype}"
                )
            if not mask.any():
                raise ValueError(
                    "`options['reset_mask']` must contain a boolean array with at least one "
                    f"True value, got reset_mask={mask}"
                )
        if seed is None and not self._started:
            # The first reset starts from the construction seed, so `make_vec(seed=s)`
            # then `reset()` equals `reset(seed=s)` (and EnvPool's first batch).
            seed = self._seed
        self._started = True
        if seed is None or isinstance(seed, (int, np.integer)):
            seed = None if seed is None else check_seed(seed, self.env_id)
            obs = self._native.reset(seed=seed, mask=mask)
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(
                    "If seeds are passed as a list the length must match "
                    f"num_envs={self.num_envs} but got length={len(seeds)}."
                )
            obs = self._native.reset(
                seeds=[None if s is None else check_seed(s, self.env_id) for s in seeds], mask=mask
            )
        return obs, {}

    def step(self, actions: Any):
        a = as_actions(actions, self._discrete, self.env_id)
        obs, rewards, terminated, truncated, final_obs = self._native.step(a)
        infos: dict[str, Any] = {}
        if self._same_step:
            done = terminated | truncated
            if done.any():
                assert final_obs is not None  # same-step mode keeps them
                finals = np.full(self.num_envs, None, dtype=object)
                for i in np.flatnonzero(done):
                    finals[i] = final_obs[i]
                infos = {
                    "final_obs": finals,
                    "_final_obs": done.copy(),
                    "final_info": {},
                    "_final_info": done,
                }
        return obs, rewards, terminated, truncated, infos

    def step_into(
        self,
        actions: Any,
        obs: np.ndarray,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
    ) -> None:
        """`step` writing into caller-owned, C-contiguous arrays (obs in the
        observation space's dtype: uint8 for Atari, else float32; rewards float64,
        flags bool; shaped as `step` returns them); no infos. In
        same-step mode the final observations are not kept: use `step` for those."""
        a = as_actions(actions, self._discrete, self.env_id)
        self._native.step_into(a, obs, rewards, terminated, truncated)

    def render(self) -> tuple[np.ndarray, ...] | None:
        """Every env's frame (`render_mode="rgb_array"`), as Gymnasium's vector envs
        return them: a tuple of uint8 `[height, width, 3]` arrays."""
        if self.render_mode is None:
            return None
        return tuple(self._native.render(i) for i in range(self.num_envs))

    def get_state(self, i: int) -> list[float]:
        """Env `i`'s internal state, as Gymnasium's `env.unwrapped.state` holds it."""
        return self._native.get_state(int(i))

    def set_state(self, i: int, state: Sequence[float]) -> np.ndarray:
        """Starts an episode of env `i` from `state`; returns its observation."""
        return self._native.set_state(int(i), [float(x) for x in state])[0]

    def close_extras(self, **kwargs: Any) -> None:
        self._native.close()

    def __repr__(self) -> str:
        return f"RlrigVectorEnv({self.env_id}, num_envs={self.num_envs})"


def make_vec(
    env_id: str,
    num_envs: int,
    *,
    num_threads: int | None = None,
    seed: int | None = None,
    autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
    **env_args: Any,
) -> RlrigVectorEnv:
    """A Gymnasium vector env of `num_envs` rlrig `env_id` envs (ids as `rlrig envs`
    lists them, e.g. `CartPole-v1`, `MinAtar/Breakout-v1`, or Gymnasium's
    `rlrig/...` form). Keyword arguments are the env's parameters, as
    `gymnasium.make(id, key=value)` takes them."""
    from rlrig import native_id

    return RlrigVectorEnv(
        native_id(env_id),
        num_envs,
        num_threads=num_threads,
        seed=seed,
        autoreset_mode=autoreset_mode,
        **env_args,
    )


def _vector_entry_point(num_envs: int = 1, env_id: str = "", **kwargs: Any) -> RlrigVectorEnv:
    """`gymnasium.make_vec("rlrig/...")`'s entry point."""
    return RlrigVectorEnv(env_id, num_envs, **kwargs)
