//! Speed of the device kernels' layouts ([`rlrig_gpu::Tuning`]) on this machine's GPU:
//!
//!     cargo run --release -p rlrig-gpu --example sweep -- [SEEDS] [STEPS] [LAYOUTS]
//!
//! trains SEEDS CartPole PPO runs (default 1) of STEPS env steps each (default 102,400)
//! once per layout and prints one JSON line per layout: training seconds (first launch to
//! last readback, after the kernels are built) and the mean training return of the last
//! iteration, so a faster layout that learns differently shows up; then, where the
//! adapter has timestamps, 10 more iterations with every dispatch timed on the device
//! (`ms_per_iteration`: rollout, GAE, update kernels, gaps between dispatches). LAYOUTS picks some
//! (comma-separated, as `--gpu-layout` names them: `4x16,2x8u,1x16f`); by default the
//! candidates left after 2026-11-27's H200 sweeps (2 or 4 threads per unit and
//! written-out 16-row passes were slower there for 1 and 1,024 runs).

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
    const PROFILED: u64 = 10;
    let batch = PpoConfig::default().batch_size() as u64;
    let timed = steps.div_ceil(batch);
    let cfg = PpoConfig {
        total_steps: (timed + PROFILED) * batch,
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
        None => [
            "1x8", "1x8u", "1x8f", "1x8uf", "1x16", "1x16f", "1x8w", "1x8wf", "1x8uwf",
        ]
        .iter()
        .map(|l| l.parse().expect("a valid layout"))
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
        if let Err(e) = p.run(timed) {
            println!("{{\"layout\": \"{tuning}\", \"error\": {e:?}}}");
            continue;
        }
        let secs = t0.elapsed().as_secs_f64();
        let metrics = p.metrics().expect("readback");
        let last: Vec<f64> = metrics
            .iter()
            .filter_map(|m| m.get(timed as usize - 1).map(|s| s.mean_return))
            .filter(|r| r.is_finite())
            .collect();
        let mean = last.iter().sum::<f64>() / last.len().max(1) as f64;
        let profile = match p.profile(PROFILED) {
            Ok(k) => {
                let ms = |s: f64| format!("{:.3}", 1e3 * s / k.iterations.max(1) as f64);
                format!(
                    ", \"ms_per_iteration\": {{\"rollout\": {}, \"gae\": {}, \"update\": {}, \"between_dispatches\": {}, \"dispatches\": {}}}",
                    ms(k.kernels[0]),
                    ms(k.kernels[1]),
                    ms(k.kernels[2]),
                    ms(k.between),
                    k.dispatches / k.iterations.max(1)
                )
            }
            Err(e) => format!(", \"profile\": {:?}", e.to_string()),
        };
        println!(
            "{{\"device\": {:?}, \"layout\": \"{tuning}\", \"seeds\": {seeds}, \"steps_per_seed\": {}, \"train_seconds\": {secs:.3}, \"seeds_per_sec\": {:.2}, \"last_return_mean\": {mean:.1}{profile}}}",
            gpu.describe(),
            timed * batch,
            seeds as f64 / secs
        );
    }
}
