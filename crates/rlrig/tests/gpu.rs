//! `rlrig train ppo --device gpu` (PPO resident on the GPU) end to end, in a build with
//! `--features gpu`. CI runs it on Mesa's software Vulkan (lavapipe): correctness and
//! learning, not speed.
#![cfg(feature = "gpu")]

#[macro_use]
mod common;

use common::{fails_with, ok, read_json, rlrig, stdout, tmp};

/// Whether this machine has a wgpu adapter; CI (RLRIG_REQUIRE_WGPU=1) insists on one.
fn adapter_here() -> bool {
    common::wgpu_adapter(rlrig_gpu::Gpu::open()).is_some()
}

#[test]
fn two_seeds_train_cartpole_on_the_device_and_pass_the_cpu_evaluation() {
    if !adapter_here() {
        return;
    }
    let dir = tmp("gpu-two-seeds");
    let d = dir.to_str().unwrap();
    let o = rlrig(&argv![
        "train ppo --device gpu --seeds 1-2 --total-steps 20480 --eval-episodes 10 --run-dir",
        d,
        "--quiet",
    ]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", common::stderr(&o));
    assert!(out.contains("2 runs x 20480 steps"), "{out}");
    let runs = read_json(dir.join("runs.json"));
    let per = runs["per_run"].as_array().unwrap();
    assert_eq!(per.len(), 2);
    // After 20k steps the CPU path's greedy CartPole return is ~150-500; a random
    // policy's is ~22. The device-trained weights are evaluated by rlrig-env in f64.
    // (Seeds 1-2 reach 172 and 245 on lavapipe; a CPU with other vector widths may
    // round differently and take another trajectory, hence the margin.)
    let means: Vec<f64> = per
        .iter()
        .map(|r| r["eval_mean"].as_f64().unwrap())
        .collect();
    assert!(
        means.iter().all(|&m| m >= 100.0) && means.iter().sum::<f64>() / 2.0 >= 150.0,
        "greedy returns {means:?}"
    );
    let csv = std::fs::read_to_string(dir.join("metrics.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        1 + 2 * 40,
        "one row per seed and iteration"
    );
    let st = std::fs::read(dir.join("params.safetensors")).unwrap();
    let t = safetensors::SafeTensors::deserialize(&st).unwrap();
    assert_eq!(t.tensor("params").unwrap().shape(), &[2, 9155]);
}

#[test]
fn what_the_device_path_cannot_run_is_an_error_that_names_it() {
    // Config checks come before the adapter is opened: no GPU needed.
    let dir = tmp("gpu-errors");
    let d = dir.to_str().unwrap();
    let base = ["train", "ppo", "--device", "gpu", "--run-dir", d, "--quiet"];
    let with = |extra: &[&'static str]| {
        let mut v: Vec<&str> = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    fails_with(
        &with(&["--env", "LunarLander-v3"]),
        None,
        &["--device gpu", "LunarLander-v3", "not on the device"],
    );
    // Acrobot's preset normalises observations, which the kernel does not do yet.
    fails_with(
        &with(&["--env", "Acrobot-v1"]),
        None,
        &["norm_obs", "not supported"],
    );
    fails_with(
        &with(&argv![
            "--env Acrobot-v1 --set norm_obs=false --env-arg fast_trig=true",
        ]),
        None,
        &["fast_trig", "default parameters"],
    );
    fails_with(
        &with(&["--env-arg", "max_episode_steps=0"]),
        None,
        &["max_episode_steps", "at least 1"],
    );
    fails_with(
        &with(&["--set", "hidden=[64, 32]"]),
        None,
        &["--device gpu", "hidden", "two equal hidden layers"],
    );
    fails_with(
        &with(&["--set", "norm_obs=true"]),
        None,
        &["norm_obs", "not supported"],
    );
    // The kernel's hidden layers are tanh.
    fails_with(
        &with(&["--set", "activation=\"relu\""]),
        None,
        &["activation", "only tanh", "not supported"],
    );
    fails_with(
        &["train", "a2c", "--device", "gpu", "--run-dir", d, "--quiet"],
        None,
        &["--device gpu", "ppo"],
    );
    // (Without --device gpu, --seeds packs CPU runs: tests/train.rs.)
    fails_with(
        &argv!["train sac --device gpu --seeds 1-4 --run-dir", d, "--quiet"],
        None,
        &["--seeds with --device gpu", "ppo"],
    );
    fails_with(
        &with(&["--gpu-layout", "4by16"]),
        None,
        &["--gpu-layout", "'4by16'", "SPLITxROWS"],
    );
    fails_with(
        &argv!["train ppo --gpu-layout 4x16 --run-dir", d, "--quiet"],
        None,
        &["--gpu-layout", "--device gpu"],
    );
    // A malformed list is clap's usage error (exit 2).
    let o = rlrig(&["train", "ppo", "--device", "gpu", "--seeds", "4-1"]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--seeds 4-1: range 4-1 runs backwards"),
        "{err}"
    );
}

/// Acrobot trained on the device (two seeds, its observation of 6 and 3 actions through
/// the same kernel as CartPole's), with a time limit set by `--env-arg` that the device
/// and the CPU evaluation both keep: every training episode and every evaluation episode
/// ends within 50 steps. Four threads per hidden unit (`--gpu-layout 4x8`): the layout
/// CartPole's tests do not use, with an observation (6) that the parts split unevenly.
#[test]
fn acrobot_trains_on_the_device_with_its_env_args() {
    if !adapter_here() {
        return;
    }
    let dir = tmp("gpu-acrobot");
    let d = dir.to_str().unwrap();
    let o = rlrig(&argv![
        "train ppo --device gpu --env Acrobot-v1 --set norm_obs=false --env-arg",
        "max_episode_steps=50 --seeds 1-2 --total-steps 5120 --eval-episodes 3 --gpu-layout 4x8",
        "--run-dir",
        d,
        "--quiet",
    ]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", common::stderr(&o));
    assert!(
        out.contains("Acrobot-v1 ppo")
            && out.contains("layout 4x8")
            && out.contains("2 runs x 5120 steps"),
        "{out}"
    );
    let csv = std::fs::read_to_string(dir.join("metrics.csv")).unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), 2 * 10, "one row per seed and iteration");
    for r in &rows {
        // 4 envs x 128 steps with 50-step episodes: about 10 episodes an iteration,
        // each returning -50..0.
        let (episodes, mean): (u32, f64) = (r[3].parse().unwrap(), r[4].parse().unwrap());
        assert!((8..=12).contains(&episodes), "{r:?}");
        assert!((-50.0..=0.0).contains(&mean), "{r:?}");
    }
    let runs = read_json(dir.join("runs.json"));
    for r in runs["per_run"].as_array().unwrap() {
        for x in r["eval_returns"].as_array().unwrap() {
            assert!((-50.0..=0.0).contains(&x.as_f64().unwrap()), "{r}");
        }
    }
    let st = std::fs::read(dir.join("params.safetensors")).unwrap();
    let t = safetensors::SafeTensors::deserialize(&st).unwrap();
    // Critic 6-64-64-1 and actor 6-64-64-3.
    assert_eq!(t.tensor("params").unwrap().shape(), &[2, 4673 + 4803]);
}

/// `bench env --device gpu`: every device env steps with random actions and reports its
/// throughput and the random policy's episodes (CartPole's mean return is ~22).
#[test]
fn bench_env_on_the_device_reports_steps_and_episodes() {
    if !adapter_here() {
        return;
    }
    for env in [
        "CartPole-v1",
        "Acrobot-v1",
        "MountainCar-v0",
        "MountainCarContinuous-v0",
        "Pendulum-v1",
        "MinAtar/Breakout-v1",
    ] {
        let o = rlrig(&argv![
            "bench env --device gpu --env",
            env,
            "--num-envs 2048 --steps 2000000 --warmup 0 --json",
        ]);
        let out = stdout(&o);
        assert!(o.status.success(), "{env}: {out}{}", common::stderr(&o));
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["env"], env);
        assert_eq!(v["num_envs"], 2048);
        // Whole dispatches of every env, at least the 2M steps asked.
        let (steps, k, d) = (
            v["steps"].as_u64().unwrap(),
            v["steps_per_dispatch"].as_u64().unwrap(),
            v["dispatches"].as_u64().unwrap(),
        );
        assert!(steps >= 2_000_000 && steps == d * k * 2048, "{v}");
        assert!(v["steps_per_sec"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["episodes"].as_u64().unwrap() > 0, "{v}");
        if env == "CartPole-v1" {
            let m = v["mean_return"].as_f64().unwrap();
            assert!((21.0..24.0).contains(&m), "{v}");
        }
    }
}

#[test]
fn bench_env_on_the_device_refuses_what_does_not_apply() {
    fails_with(
        &["bench", "env", "--device", "gpu", "--env", "LunarLander-v3"],
        None,
        &["LunarLander-v3", "no device kernel", "CartPole-v1"],
    );
    fails_with(
        &["bench", "env", "--device", "gpu", "--threads", "4"],
        None,
        &["--threads", "do not apply"],
    );
    fails_with(
        &argv!["bench env --device gpu --env-arg max_episode_steps=10"],
        None,
        &["--env-arg", "default parameters"],
    );
    fails_with(
        &["bench", "env", "--device", "tpu"],
        None,
        &["--device tpu", "cpu, gpu"],
    );
}

/// `rlrig probe` times a copy each way through the device path's runtime.
#[test]
fn probe_times_host_device_copies() {
    if !adapter_here() {
        return;
    }
    let o = ok(&["probe", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &v["gpu_copy"];
    assert_eq!(c["bytes"], 64 << 20, "{v}");
    for k in ["host_to_device_mb_s", "device_to_host_mb_s"] {
        assert!(c[k].as_f64().unwrap() > 0.0, "{c}");
    }
    let o = rlrig(&["probe"]);
    let out = stdout(&o);
    assert!(
        out.contains("host -> device") && out.contains("MB/s"),
        "{out}"
    );
}
