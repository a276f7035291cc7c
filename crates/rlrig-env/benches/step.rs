//! `cargo bench -p rlrig-env`: env steps per second of the synchronous executor
//! (criterion reports elements/s = env steps/s). Random actions are precomputed.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rlrig_env::{ENV_IDS, RandomActions, VecConfig, make_sync, spec};

fn bench_env(c: &mut Criterion, id: &str, num_envs: usize, threads: usize) {
    let s = spec(id).unwrap();
    let mut env = make_sync(id, VecConfig::new(num_envs).threads(threads)).unwrap();
    let table = RandomActions::new(&s.action_space, num_envs, 0);
    let buf = table.slice(0, num_envs);
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
