"""Exported policies: the named `[out, in]` tensors reproduce the policy's actions in
plain NumPy by following the metadata, and the safetensors file holds the same."""

import json
import re
import struct

import numpy as np
import pytest

import rlrig


def read_safetensors(path):
    """The safetensors format by hand: an 8-byte header length, a JSON header, data."""
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    out = {}
    for name, h in header.items():
        assert h["dtype"] == "F32"
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(h["shape"])
    return out, meta


def sequential(t, prefix, layers, x):
    """Runs `prefix.layers` ("Linear(4, 64), Tanh(), ...") with PyTorch's `x @ W.T + b`."""
    i = 0
    for module in re.findall(r"\w+\([^)]*\)", layers):
        if module.startswith("Conv2d"):
            w, b = t[f"{prefix}.{i}.weight"], t[f"{prefix}.{i}.bias"]
            pad = int(re.search(r"padding=(\d+)", module).group(1))
            x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
            stride = int(re.search(r"stride=(\d+)", module).group(1))
            win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))[:, :, ::stride, ::stride]
            x = np.einsum("nchwij,ocij->nohw", win, w) + b[None, :, None, None]
        elif module == "Flatten()":
            x = x.reshape(len(x), -1)
        elif module.startswith("Linear"):
            x = x @ t[f"{prefix}.{i}.weight"].T + t[f"{prefix}.{i}.bias"]
        elif module == "Tanh()":
            x = np.tanh(x)
        elif module == "ReLU()":
            x = np.maximum(x, 0)
        i += 1
    return x


def numpy_actions(t, meta, obs):
    algo, action = meta["algo"], meta["action"]
    if "obs_layout" in meta and "HWC" in meta["obs_layout"]:
        obs = obs.transpose(0, 3, 1, 2)
    if "obs_layout" in meta and "reads obs * " in meta["obs_layout"]:
        obs = obs * float(meta["obs_layout"].split("reads obs * ")[1])
    if meta["obs_norm"] != "none":
        obs = np.clip((obs - t["obs_rms.mean"]) / np.sqrt(t["obs_rms.var"] + 1e-8), -10, 10)
    if action == "argmax(actor(obs), -1)":
        return np.argmax(sequential(t, "actor", meta["actor.layers"], obs), -1)
    if action == "argmax(net(obs)[:, 1:], -1)":
        # One trunk under both heads (the Nature CNN): column 0 is the value.
        return np.argmax(sequential(t, "net", meta["net.layers"], obs)[:, 1:], -1)
    if action == "argmax(q(obs), -1)":
        return np.argmax(sequential(t, "q", meta["q.layers"], obs), -1)
    if action == "clip(actor(obs), action_low, action_high)":
        return np.clip(sequential(t, "actor", meta["actor.layers"], obs), t["action_low"], t["action_high"])
    if action.startswith("tanh(actor(obs)[:, :"):
        d = int(action.split(":, :")[1].split("]")[0])
        out = sequential(t, "actor", meta["actor.layers"], obs)[:, :d]
        return np.tanh(out) * t["action_scale"] + t["action_bias"]
    raise AssertionError(f"unknown action formula {action!r} ({algo})")


@pytest.mark.parametrize(
    "algo,env,budget,extra",
    [
        ("ppo", "CartPole-v1", 8_192, {}),
        ("ppo", "Pendulum-v1", 4_096, {"norm_obs": True}),
        ("dqn", "CartPole-v1", 2_000, {}),
        ("td3", "Pendulum-v1", 600, {}),
        ("sac", "Pendulum-v1", 600, {}),
    ],
)
def test_exported_tensors_reproduce_the_policy_in_numpy(tmp_path, algo, env, budget, extra):
    run = rlrig.train(algo, env, total_steps=budget, run_dir=tmp_path / "run", quiet=True,
                      eval_episodes=1, **extra)
    policy = rlrig.load(run["run_dir"])
    t, meta = policy.state_dict(), policy.metadata
    assert meta["format"] == "rlrig-policy-1" and meta["env"] == env
    prefix = "q" if algo == "dqn" else "actor"
    w0 = t[f"{prefix}.0.weight"]
    assert w0.shape[1] == policy.observation_space.shape[0], "PyTorch's [out, in]"
    if extra.get("norm_obs"):
        assert "obs_rms.mean" in t and meta["obs_norm"].startswith("obs = clip(")
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (64, *policy.observation_space.shape)).astype(np.float32)
    want = policy.act(obs)
    got = numpy_actions(t, meta, obs.astype(np.float64))
    if want.dtype.kind == "i":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # The file holds the same tensors and metadata.
    path = tmp_path / "policy.safetensors"
    policy.export(path)
    ft, fmeta = read_safetensors(path)
    assert fmeta == meta and sorted(ft) == sorted(t)
    for k in t:
        np.testing.assert_array_equal(ft[k], t[k])


def test_minatar_conv_policy_exports_as_pytorch_conv2d(tmp_path):
    # MinAtar's conv network (A2C's preset; PPO's is PureJaxRL's MLP).
    run = rlrig.train("ppo", "MinAtar/Breakout-v1", total_steps=1024, num_envs=4, run_dir=tmp_path / "r",
                      quiet=True, eval_episodes=1, num_steps=128, conv_channels=16, hidden=[128])
    policy = rlrig.load(run["run_dir"])
    t, meta = policy.state_dict(), policy.metadata
    assert meta["actor.layers"].startswith("Conv2d(4, 16, kernel_size=3, stride=1, padding=0), ReLU(), Flatten(), Linear(1024, ")
    assert t["actor.0.weight"].shape == (16, 4, 3, 3) and t["actor.3.weight"].shape[1] == 1024
    rng = np.random.default_rng(0)
    obs = (rng.random((32, 10, 10, 4)) < 0.1).astype(np.float32)
    logits = sequential(t, "actor", meta["actor.layers"], obs.transpose(0, 3, 1, 2).astype(np.float64))
    np.testing.assert_array_equal(np.argmax(logits, -1), policy.act(obs))
    np.testing.assert_array_equal(numpy_actions(t, meta, obs.astype(np.float64)), policy.act(obs))
