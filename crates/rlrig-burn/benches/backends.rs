//! `cargo bench -p rlrig-burn`: one training step (forward, backward, clipped Adam) and
//! one inference call of STACK.md's reference shape (4 -> 64 -> 64 -> 3, tanh) on every
//! backend of the learning interface: native, Burn flex and, where an adapter exists,
//! wgpu. The same calls PPO makes, so the ratios are what a run sees.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rlrig_burn::{Kind, maker};
use rlrig_env::{Purpose, Rng};
use rlrig_nn::backend::{BackendMaker, Native, NetLayout};
use rlrig_nn::nn::{Mlp, normal};
use rlrig_nn::optim::Adam;

fn benches(c: &mut Criterion) {
    let mlp = Mlp::new(&[4, 64, 64, 3], 0);
    let layout = NetLayout {
        total: mlp.num_params(),
        free: mlp.num_params()..mlp.num_params(),
        nets: vec![mlp.clone().into()],
    };
    let mut rng = Rng::stream(0, Purpose::Bench, 0);
    let mut params = vec![0.0; layout.total];
    mlp.init(&mut params, std::f32::consts::SQRT_2, 1.0, &mut rng);
    let mut backends: Vec<(&str, BackendMaker)> = vec![("native", Native::maker())];
    backends.push(("burn-cpu", maker(Kind::Cpu).expect("flex")));
    match maker(Kind::Wgpu) {
        Ok(m) => backends.push(("wgpu", m)),
        Err(e) => eprintln!("no wgpu bench: {e}"),
    }
    let mut g = c.benchmark_group("backend_4_64_64_3");
    for (name, mk) in &backends {
        let mut b = mk(&layout, &params, Adam::new(layout.total, 1e-5)).unwrap();
        for batch in [64usize, 512, 4096] {
            let x: Vec<f32> = (0..batch * 4).map(|_| normal(&mut rng) as f32).collect();
            let dout: Vec<f32> = (0..batch * 3)
                .map(|_| normal(&mut rng) as f32 / batch as f32)
                .collect();
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_function(
                BenchmarkId::new(format!("{name}/train_step"), batch),
                |bch| {
                    bch.iter(|| {
                        b.forward_train(0, &x, batch);
                        b.backward(0, &dout);
                        b.step(1e-4, 0.5)
                    })
                },
            );
        }
        for batch in [1usize, 16, 256] {
            let x: Vec<f32> = (0..batch * 4).map(|_| normal(&mut rng) as f32).collect();
            g.throughput(Throughput::Elements(batch as u64));
            g.bench_function(
                BenchmarkId::new(format!("{name}/inference"), batch),
                |bch| bch.iter(|| std::hint::black_box(b.forward(0, &x, batch)[0])),
            );
        }
    }
    g.finish();
}

criterion_group! {
    name = backends;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(backends);
