//! `cargo bench -p rlrig-env`: env steps per second of the synchronous executor
//! (criterion reports elements/s = env steps/s). Random actions are precomputed.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rlrig_env::{ActionBuf, ENV_IDS, Purpose, Rng, Space, VecConfig, make_sync, spec};

fn actions(space: &Space, n: usize) -> (Vec<i32>, Vec<f32>) {
    let mut rng = Rng::stream(0, Purpose::Bench, 0);
    match space {
        Space::Discrete { n: k } => ((0..n).map(|_| rng.below(*k) as i32).collect(), Vec::new()),
        Space::Box { low, high, .. } => (
            Vec::new(),
            (0..n * low.len())
                .map(|i| {
                    rng.uniform(
                        f64::from(low[i % low.len()]),
                        f64::from(high[i % low.len()]),
                    ) as f32
                })
                .collect(),
        ),
    }
}

fn bench_env(c: &mut Criterion, id: &str, num_envs: usize, threads: usize) {
    let s = spec(id).unwrap();
    let mut env = make_sync(id, VecConfig::new(num_envs).threads(threads)).unwrap();
    let (di, dc) = actions(&s.action_space, num_envs);
    let buf = if s.action_space.is_discrete() {
        ActionBuf::Discrete(&di)
    } else {
        ActionBuf::Continuous(&dc)
    };
    let mut g = c.benchmark_group("sync_step");
    g.throughput(Throughput::Elements(num_envs as u64));
    g.bench_function(
        BenchmarkId::new(id, format!("{num_envs}envs-{threads}t")),
        |b| b.iter(|| env.step(buf).unwrap()),
    );
    g.finish();
}

fn benches(c: &mut Criterion) {
    for id in ENV_IDS {
        bench_env(c, id, 256, 1);
    }
    bench_env(c, "CartPole-v1", 4096, 1);
    bench_env(c, "CartPole-v1", 4096, 2);
}

criterion_group! {
    name = step;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(step);
