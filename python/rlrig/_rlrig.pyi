"""Type stubs of the native module (python/src/lib.rs). Use the package's Python API
(`rlrig.make_vec`, `rlrig.make_async`, `rlrig.load`, `rlrig.train`); these classes are
what it is built on."""

from os import PathLike
from typing import Any, final

import numpy as np
import numpy.typing as npt

# Observations come in the env's dtype: uint8 for Atari's screens, float32 otherwise.
_Obs = npt.NDArray[np.float32] | npt.NDArray[np.uint8]

__all__ = ["VecEnv", "AsyncVecEnv", "Policy", "env_ids", "spec", "train_cli", "__version__"]
__version__: str

def env_ids() -> list[str]: ...
def spec(id: str, env_args: dict[str, Any] | None = None) -> dict[str, Any]: ...
def train_cli(args: list[str], quiet: bool = False) -> str | None: ...

@final
class VecEnv:
    def __new__(
        cls,
        id: str,
        num_envs: int,
        *,
        num_threads: int = 1,
        seed: int = 0,
        autoreset: str = "next_step",
        strict: bool = False,
        episode_cap: int | None = None,
        env_args: dict[str, Any] | None = None,
    ) -> VecEnv: ...
    def spec(self) -> dict[str, Any]: ...
    @property
    def num_envs(self) -> int: ...
    @property
    def threads_used(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    def reset(
        self,
        *,
        seed: int | None = None,
        seeds: list[int | None] | None = None,
        mask: npt.NDArray[np.bool_] | None = None,
    ) -> _Obs: ...
    def step(
        self, actions: npt.NDArray[Any]
    ) -> tuple[
        _Obs,
        npt.NDArray[np.float64],
        npt.NDArray[np.bool_],
        npt.NDArray[np.bool_],
        _Obs | None,
    ]: ...
    def step_into(
        self,
        actions: npt.NDArray[Any],
        obs: _Obs,
        rewards: npt.NDArray[np.float64],
        terminated: npt.NDArray[np.bool_],
        truncated: npt.NDArray[np.bool_],
    ) -> None: ...
    def get_state(self, i: int) -> list[float]: ...
    def set_state(self, i: int, state: list[float]) -> _Obs: ...
    def render(self, i: int) -> npt.NDArray[np.uint8]: ...
    def close(self) -> None: ...

@final
class AsyncVecEnv:
    def __new__(
        cls,
        id: str,
        num_envs: int,
        batch_size: int,
        *,
        num_threads: int = 1,
        seed: int = 0,
        autoreset: str = "next_step",
        episode_cap: int | None = None,
        env_args: dict[str, Any] | None = None,
    ) -> AsyncVecEnv: ...
    def spec(self) -> dict[str, Any]: ...
    @property
    def num_envs(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    def async_reset(self) -> None: ...
    def send(self, actions: npt.NDArray[Any], env_ids: npt.NDArray[np.integer[Any]] | list[int]) -> None: ...
    def recv(
        self,
    ) -> tuple[
        _Obs,
        npt.NDArray[np.float64],
        npt.NDArray[np.bool_],
        npt.NDArray[np.bool_],
        npt.NDArray[np.int32],
        _Obs | None,
    ]: ...
    def close(self) -> None: ...

@final
class Policy:
    def __new__(cls, run_dir: str | PathLike[str]) -> Policy: ...
    @property
    def env_id(self) -> str: ...
    @property
    def env_args(self) -> list[tuple[str, str]]: ...
    @property
    def seed(self) -> int: ...
    def spec(self) -> dict[str, Any]: ...
    def tensors(self) -> tuple[dict[str, npt.NDArray[np.float32]], dict[str, str]]: ...
    def export(self, path: str | PathLike[str]) -> None: ...
    def act(self, obs: npt.NDArray[np.float32]) -> npt.NDArray[Any]: ...
