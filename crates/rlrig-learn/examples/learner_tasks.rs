//! Where a learner step's time goes per thread: PPO CartPole's minibatch step (actor and
//! critic 4-64-64, 128 rows = two 64-row chunks) on the native backend, with the pool's
//! task recording on, printing each phase's mean task time per thread slot (0: the
//! caller, 1..: workers). `twice` runs the forward pass a second time right after the
//! first, on parameters already in every core's cache.
//!
//!   cargo run --release -p rlrig-learn --example learner_tasks -- [THREADS] [twice]
use rlrig_env::Rng;
use rlrig_env::pool::{record_tasks, take_recorded_tasks};
use rlrig_env::rng::Purpose;
use rlrig_learn::backend::{Native, NetBackend, NetLayout, Weights};
use rlrig_learn::nn::Mlp;
use rlrig_learn::optim::Adam;
use std::time::Instant;

fn noise(n: usize, stream: u64) -> Vec<f32> {
    let mut r = Rng::stream(7, Purpose::Init, stream);
    (0..n).map(|_| r.uniform(-1.0, 1.0) as f32).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = args.get(1).map_or(2, |s| s.parse().unwrap());
    let twice = args.get(2).is_some_and(|s| s == "twice");
    let a = Mlp::new(&[4, 64, 64, 2], 0);
    let c = Mlp::new(&[4, 64, 64, 1], a.end());
    let end = c.end();
    let lay = NetLayout {
        nets: vec![a.into(), c.into()],
        free: end..end,
        total: end,
    };
    let mut b = Native::new(&lay, &noise(lay.total, 1), Adam::new(lay.total, 1e-5))
        .threads(threads)
        .unwrap();
    let rows = 128;
    let x = noise(rows * 4, 2);
    let (d0, d1) = (noise(rows * 2, 3), noise(rows, 4));
    let mut o0 = vec![0.0; rows * 2];
    let mut o1 = vec![0.0; rows];
    let iters = 20000;
    // phases: 0 forward, 1 forward again (twice), 2 backward, 3 step
    let mut marks: Vec<(Instant, usize)> = Vec::new();
    // Pass 0 warms up; pass 1 records every task and marks where each phase starts.
    for pass in 0..2 {
        if pass == 1 {
            record_tasks(true);
            take_recorded_tasks();
            marks.clear();
        }
        let t0 = Instant::now();
        for _ in 0..iters {
            marks.push((Instant::now(), 0));
            b.forward_into(Weights::Train, &[0, 1], &x, rows, &mut [&mut o0, &mut o1]);
            if twice {
                marks.push((Instant::now(), 1));
                b.forward_into(Weights::Train, &[0, 1], &x, rows, &mut [&mut o0, &mut o1]);
            }
            marks.push((Instant::now(), 2));
            b.backward_many(&[(0, &d0), (1, &d1)]);
            marks.push((Instant::now(), 3));
            b.step(1e-5, 0.5);
        }
        println!(
            "pass {pass}: {:.2} us / iteration",
            t0.elapsed().as_secs_f64() * 1e6 / iters as f64
        );
    }
    let tasks = take_recorded_tasks();
    let mut sum = [[0.0f64; 4]; 4];
    let mut cnt = [[0usize; 4]; 4];
    for (slot, s, e) in tasks {
        let i = marks.partition_point(|(t, _)| *t <= s);
        if i == 0 {
            continue;
        }
        let ph = marks[i - 1].1;
        sum[ph][slot.min(3)] += (e - s).as_secs_f64() * 1e6;
        cnt[ph][slot.min(3)] += 1;
    }
    for (ph, name) in ["forward", "forward2", "backward", "step"]
        .iter()
        .enumerate()
    {
        let row: Vec<String> = (0..threads.min(4))
            .map(|s| {
                format!(
                    "slot {s}: {:>4} tasks {:6.2} us",
                    cnt[ph][s],
                    sum[ph][s] / cnt[ph][s].max(1) as f64
                )
            })
            .collect();
        println!("{name:9} {}", row.join(" | "));
    }
}
