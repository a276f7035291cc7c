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
    "train",
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

    def state_dict(self) -> dict[str, np.ndarray]:
        """The acting network's tensors, named as PyTorch names an `nn.Sequential` of
        `Linear` and activation modules (`actor.0.weight` is `[out, in]`), with the
        observation statistics and action bounds the policy uses. `metadata` says how
        they combine: `metadata["action"]`, `metadata["value"]` (PPO family),
        `metadata["obs_norm"]` and `metadata["actor.layers"]` (or `q.layers`,
        `policy.layers`, `net.layers` for a trunk shared by policy and value)."""
        return dict(self._native.tensors()[0])

    @property
    def metadata(self) -> dict[str, str]:
        return dict(self._native.tensors()[1])

    def export(self, path: str | Path) -> None:
        """Writes `state_dict()` and `metadata` to a safetensors file (loadable with
        `safetensors.numpy.load_file` or `safetensors.torch.load_file`)."""
        self._native.export(str(path))

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


def _flag_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_flag_value(x) for x in v) + "]"
    return str(v)


def train(
    algo: str,
    env: str | None = None,
    *,
    total_steps: int | None = None,
    seed: int | None = None,
    num_envs: int | None = None,
    threads: int | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    config: str | Path | None = None,
    device: str | None = None,
    eval_episodes: int | None = None,
    quiet: bool = False,
    env_args: dict[str, Any] | None = None,
    **hyperparameters: Any,
) -> dict[str, Any]:
    """Trains `algo` (ppo, a2c, impala, dqn, ddpg, td3, sac, es, ga, alphazero) as
    `rlrig train ALGO ...` does: the same presets, driver, progress bar, run directory
    and checkpoints; `**hyperparameters` are `--set KEY=VALUE` (e.g.
    `learning_rate=3e-4`). `quiet=True`: no progress bar and no report on stdout
    (errors still raise). Ctrl-C finishes the iteration in progress, writes a
    checkpoint and raises KeyboardInterrupt (continue with `resume=True`).

    Returns `{"run_dir": ..., "eval": <eval.json or None>, "metrics": <last row of
    metrics.csv or None>}`."""
    args = [algo]
    if env is not None:
        args.append(f"--env={native_id(env)}")
    for flag, v in (("--total-steps", total_steps), ("--seed", seed), ("--num-envs", num_envs),
                    ("--threads", threads), ("--run-dir", run_dir), ("--config", config),
                    ("--device", device), ("--eval-episodes", eval_episodes)):
        if v is not None:
            args.append(f"{flag}={v}")
    if resume:
        args.append("--resume")
    for k, v in (env_args or {}).items():
        args.append(f"--env-arg={k}={_flag_value(v)}")
    for k, v in hyperparameters.items():
        args.append(f"--set={k}={_flag_value(v)}")
    out = _rlrig.train_cli(args, quiet)
    result: dict[str, Any] = {"run_dir": out, "eval": None, "metrics": None}
    if out is not None:
        import csv
        import json

        d = Path(out)
        if (d / "eval.json").is_file():
            result["eval"] = json.loads((d / "eval.json").read_text())
        if (d / "metrics.csv").is_file():
            with open(d / "metrics.csv", newline="") as f:
                rows = list(csv.DictReader(f))
            if rows:
                result["metrics"] = {k: _number(v) for k, v in rows[-1].items()}
    return result


def _number(s: str) -> Any:
    try:
        return int(s)
    except ValueError:
        try:
            return float(s)
        except ValueError:
            return s
