//! Speed of the device kernels' layouts ([`rlrig_gpu::Tuning`]) on this machine's GPU:
//!
//!     cargo run --release -p rlrig-gpu --example sweep -- [SEEDS] [STEPS]
//!
//! trains SEEDS CartPole PPO runs (default 1) of STEPS env steps each (default 102,400)
//! once per layout and prints one JSON line per layout: training seconds (first launch to
//! last readback, after the kernels are built) and the mean training return of the last
//! iteration, so a faster layout that learns differently shows up.

use rlrig_gpu::{Gpu, ResidentPpo, Tuning};
use rlrig_learn::ppo::PpoConfig;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seeds: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let steps: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(102_400);
    let gpu = match Gpu::open() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("sweep: {e}");
            std::process::exit(1);
        }
    };
    let cfg = PpoConfig {
        total_steps: steps,
        ..PpoConfig::default()
    };
    let list: Vec<u64> = (1..=seeds).collect();
    for rows in [Some(8), Some(16)] {
        for unroll_units in [false, true] {
            let tuning = Tuning { rows, unroll_units };
            let mut p = match ResidentPpo::new(&gpu, &cfg, &list, &tuning) {
                Ok(p) => p,
                Err(e) => {
                    println!("{{\"tuning\": \"{tuning:?}\", \"error\": {e:?}}}");
                    continue;
                }
            };
            let t0 = Instant::now();
            if let Err(e) = p.run(u64::MAX) {
                println!("{{\"tuning\": \"{tuning:?}\", \"error\": {e:?}}}");
                continue;
            }
            let secs = t0.elapsed().as_secs_f64();
            let metrics = p.metrics().expect("readback");
            let last: Vec<f64> = metrics
                .iter()
                .filter_map(|m| m.last().map(|s| s.mean_return))
                .filter(|r| r.is_finite())
                .collect();
            let mean = last.iter().sum::<f64>() / last.len().max(1) as f64;
            println!(
                "{{\"device\": {:?}, \"tuning\": \"{tuning:?}\", \"seeds\": {seeds}, \"steps_per_seed\": {}, \"train_seconds\": {secs:.3}, \"seeds_per_sec\": {:.2}, \"last_return_mean\": {mean:.1}}}",
                gpu.describe(),
                p.iteration() * cfg.batch_size() as u64,
                seeds as f64 / secs
            );
        }
    }
}
