//! Speed of the device kernels' layouts ([`rlrig_gpu::Tuning`]) on this machine's GPU:
//!
//!     cargo run --release -p rlrig-gpu --example sweep -- [SEEDS] [STEPS] [LAYOUTS]
//!
//! trains SEEDS CartPole PPO runs (default 1) of STEPS env steps each (default 102,400)
//! once per layout and prints one JSON line per layout: training seconds (first launch to
//! last readback, after the kernels are built) and the mean training return of the last
//! iteration, so a faster layout that learns differently shows up. LAYOUTS picks some
//! (comma-separated, as `--gpu-layout` names them: `4x16,2x8u`); by default every split
//! (1, 2, 4) x rows (8, 16) x looped / written-out products.

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
    // Layouts named on the command line, else every split x rows x products form.
    let layouts: Vec<Tuning> = match args.get(3) {
        Some(list) => list
            .split(',')
            .map(|l| {
                l.parse().unwrap_or_else(|e| {
                    eprintln!("sweep: {e}");
                    std::process::exit(2)
                })
            })
            .collect(),
        None => [1, 2, 4]
            .into_iter()
            .flat_map(|split| {
                [8, 16].into_iter().flat_map(move |rows| {
                    [false, true].map(|unroll_units| Tuning {
                        rows: Some(rows),
                        unroll_units,
                        split,
                    })
                })
            })
            .collect(),
    };
    for tuning in layouts {
        let mut p = match ResidentPpo::new(&gpu, &cfg, &list, &tuning) {
            Ok(p) => p,
            Err(e) => {
                println!("{{\"layout\": \"{tuning}\", \"error\": {e:?}}}");
                continue;
            }
        };
        let t0 = Instant::now();
        if let Err(e) = p.run(u64::MAX) {
            println!("{{\"layout\": \"{tuning}\", \"error\": {e:?}}}");
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
            "{{\"device\": {:?}, \"layout\": \"{tuning}\", \"seeds\": {seeds}, \"steps_per_seed\": {}, \"train_seconds\": {secs:.3}, \"seeds_per_sec\": {:.2}, \"last_return_mean\": {mean:.1}}}",
            gpu.describe(),
            p.iteration() * cfg.batch_size() as u64,
            seeds as f64 / secs
        );
    }
}
