//! `--device burn-cpu|wgpu` end to end, in a build with `--features burn`. CI runs the
//! wgpu tests on Mesa's software Vulkan (lavapipe), which checks correctness, not speed.
#![cfg(feature = "burn")]

#[macro_use]
mod common;

use common::{
    final_weights, kill_after_first_checkpoint, ok, read_json, rlrig, stderr, stdout, tmp,
};

fn ppo_args<'a>(dir: &'a str, device: &'a str, steps: &'a str) -> Vec<&'a str> {
    argv![
        "train ppo --env CartPole-v1 --device",
        device,
        "--num-envs 8 --total-steps",
        steps,
        "--set checkpoint_every=4096 --threads 1 --run-dir",
        dir,
        "--quiet --eval-episodes 10",
    ]
}

fn eval_return(dir: &std::path::Path) -> f64 {
    let v = read_json(dir.join("eval.json"));
    v["mean_return"].as_f64().unwrap()
}

/// Whether this machine has a wgpu adapter; CI (RLRIG_REQUIRE_WGPU=1) insists on one.
fn wgpu_here() -> bool {
    common::wgpu_adapter(rlrig_burn::open(rlrig_burn::Kind::Wgpu)).is_some()
}

#[test]
fn ppo_on_wgpu_learns_like_the_cpu_run() {
    if !wgpu_here() {
        return;
    }
    let (cpu, gpu) = (tmp("burn-cpu-ref"), tmp("burn-wgpu"));
    for (d, dev) in [(&cpu, "cpu"), (&gpu, "wgpu")] {
        let o = rlrig(&ppo_args(d.to_str().unwrap(), dev, "40960"));
        assert!(o.status.success(), "{dev}: {}", stderr(&o));
    }
    let (a, b) = (eval_return(&cpu), eval_return(&gpu));
    // Random play scores ~22; both runs must have learned, and to a similar level.
    assert!(a >= 150.0, "cpu run reached {a}");
    assert!(
        b >= 150.0 && b >= 0.6 * a,
        "wgpu run reached {b}, cpu run {a}"
    );
}

#[test]
fn a_burn_cpu_run_killed_after_a_checkpoint_resumes_to_the_same_weights() {
    let (full, killed) = (tmp("burn-full"), tmp("burn-killed"));
    let steps = "12288";
    ok(&ppo_args(full.to_str().unwrap(), "burn-cpu", steps));
    kill_after_first_checkpoint(
        &ppo_args(killed.to_str().unwrap(), "burn-cpu", steps),
        &killed,
    );
    let mut args = ppo_args(killed.to_str().unwrap(), "burn-cpu", steps);
    args.push("--resume");
    ok(&args);
    assert_eq!(final_weights(&full), final_weights(&killed));
}

/// The default AlphaZero run on a Burn device: self-play inference and training go
/// through Burn, and the agent still learns to beat random play.
#[test]
fn alphazero_on_burn_cpu_beats_random_play() {
    let d = tmp("burn-az");
    let ds = d.to_str().unwrap();
    let o = ok(&argv![
        "train alphazero --device burn-cpu --run-dir",
        ds,
        "--quiet",
    ]);
    let out = stdout(&o);
    assert!(out.contains("alphazero on burn-cpu"), "{out}");
    let ev = read_json(d.join("eval.json"));
    assert!(ev["win_rate_random"].as_f64().unwrap() >= 0.9, "{ev}");
}

#[test]
fn an_unknown_device_is_refused() {
    let d = tmp("burn-refused");
    let ds = d.to_str().unwrap();
    for algo in ["ppo", "sac"] {
        let o = rlrig(&["train", algo, "--device", "tpu", "--run-dir", ds]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("invalid value 'tpu' for '--device"));
    }
}

/// A small TD3 run on Pendulum (its critics' action gradient and target networks on
/// the device), or DQN on CartPole (its Q-network and target there): updates from step
/// 200, the first checkpoint at 400 (after ~50 updates, so it holds trained targets,
/// optimiser moments and a replay buffer), the end at 600.
fn replay_args<'a>(algo: &'a str, dir: &'a str, device: &'a str) -> Vec<&'a str> {
    let env = if algo == "dqn" {
        "CartPole-v1"
    } else {
        "Pendulum-v1"
    };
    argv![
        "train",
        algo,
        "--env",
        env,
        "--device",
        device,
        "--total-steps 600 --num-envs 4 --set learning_starts=200 --set hidden=[32,32] --set",
        "batch_size=64 --set log_every=200 --set checkpoint_every=400 --threads 1 --run-dir",
        dir,
        "--quiet --eval-episodes 2",
    ]
}

/// `rlrig train td3|dqn --device burn-cpu|wgpu` end to end: it says where it ran, a
/// run killed after a checkpoint resumes to the same weights (targets, optimisers and
/// replay buffer included), and eval reads the run.
#[test]
fn offpolicy_on_burn_devices_runs_resumes_and_evaluates() {
    let mut devices = vec!["burn-cpu"];
    if wgpu_here() {
        devices.push("wgpu");
    }
    for (device, algo) in devices.iter().flat_map(|d| [(*d, "td3"), (*d, "dqn")]) {
        let (full, killed) = (
            tmp(&format!("burn-{algo}-full")),
            tmp(&format!("burn-{algo}-killed")),
        );
        let o = rlrig(&replay_args(algo, full.to_str().unwrap(), device));
        assert!(o.status.success(), "{device}: {}", stderr(&o));
        let out = stdout(&o);
        let shown = format!("{algo} on {device}");
        assert!(out.contains(&shown), "{out}");
        // The run report must not credit the native path with a Burn run.
        assert!(!out.contains("native CPU path ran"), "{out}");
        assert!(out.contains("the networks ran on"), "{out}");
        kill_after_first_checkpoint(
            &replay_args(algo, killed.to_str().unwrap(), device),
            &killed,
        );
        let mut args = replay_args(algo, killed.to_str().unwrap(), device);
        args.push("--resume");
        let o = rlrig(&args);
        assert!(o.status.success(), "{device}: {}", stderr(&o));
        assert_eq!(
            final_weights(&full),
            final_weights(&killed),
            "{algo} {device}"
        );
        let o = rlrig(&["eval", "--run", full.to_str().unwrap(), "--episodes", "2"]);
        assert!(o.status.success(), "{device}: {}", stderr(&o));
    }
}
