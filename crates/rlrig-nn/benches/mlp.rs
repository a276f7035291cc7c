//! `cargo bench -p rlrig-nn --bench mlp`: the native path on STACK.md's reference shape,
//! a 4 -> 64 -> 64 -> 3 tanh MLP (2 logits + value): one training step (forward,
//! backward, Adam) and one inference call, at several batch sizes.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rlrig_env::{Purpose, Rng};
use rlrig_nn::nn::{Mlp, MlpCache, normal};
use rlrig_nn::optim::{Adam, clip_grad_norm};

fn benches(c: &mut Criterion) {
    let mlp = Mlp::new(&[4, 64, 64, 3], 0);
    let mut rng = Rng::stream(0, Purpose::Bench, 0);
    let mut params = vec![0.0; mlp.num_params()];
    mlp.init(&mut params, std::f32::consts::SQRT_2, 1.0, &mut rng);
    let mut g = c.benchmark_group("mlp_4_64_64_3");
    for batch in [64usize, 512, 4096] {
        let x: Vec<f32> = (0..batch * 4).map(|_| normal(&mut rng) as f32).collect();
        let dout: Vec<f32> = (0..batch * 3)
            .map(|_| normal(&mut rng) as f32 / batch as f32)
            .collect();
        let mut cache = MlpCache::default();
        let mut grads = vec![0.0; params.len()];
        let mut adam = Adam::new(params.len(), 1e-5);
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_function(BenchmarkId::new("train_step", batch), |b| {
            b.iter(|| {
                mlp.forward(&params, &x, batch, &mut cache);
                grads.fill(0.0);
                mlp.backward(&params, &mut grads, &dout, &mut cache);
                clip_grad_norm(&mut grads, 0.5);
                adam.step(&mut params, &grads, 1e-4);
            })
        });
    }
    for batch in [1usize, 16, 256] {
        let x: Vec<f32> = (0..batch * 4).map(|_| normal(&mut rng) as f32).collect();
        let mut cache = MlpCache::default();
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_function(BenchmarkId::new("inference", batch), |b| {
            b.iter(|| {
                std::hint::black_box(mlp.forward(&params, &x, batch, &mut cache));
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = mlp;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = benches
}

/// The gemm shapes of a PPO minibatch (128 rows, 64 hidden), of SAC's 256-wide layers
/// (a 64-row chunk, a 256-row batch), of RL Zoo's 400-300 TD3/SAC networks (a chunk;
/// 300 columns are not a whole number of vectors) and of the first layers of PPO's
/// MinAtar MLPs on SpaceInvaders (600 inputs) and Seaquest (1,000): forward, dW and dX.
fn gemm_shapes(c: &mut Criterion) {
    use rlrig_nn::nn::gemm;
    let mut rng = Rng::stream(1, Purpose::Bench, 0);
    let mut g = c.benchmark_group("gemm");
    for (m, k, n) in [
        (64usize, 64usize, 64usize),
        (128, 64, 64),
        (512, 64, 64),
        (4, 64, 64),
        (64, 256, 256),
        (256, 256, 256),
        (64, 400, 300),
        (128, 600, 64),
        (128, 1000, 64),
    ] {
        let a: Vec<f32> = (0..m * k).map(|_| normal(&mut rng) as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|_| normal(&mut rng) as f32).collect();
        let mut cbuf = vec![0.0f32; m * n];
        g.throughput(Throughput::Elements((m * k * n) as u64));
        g.bench_function(BenchmarkId::new("nn", format!("{m}x{k}x{n}")), |bch| {
            bch.iter(|| gemm(m, k, n, 1.0, &a, (k, 1), &b, (n, 1), 1.0, &mut cbuf, (n, 1)))
        });
        // a^T b with a stored k x m (the dW product).
        let at: Vec<f32> = (0..m * k).map(|_| normal(&mut rng) as f32).collect();
        let mut cw = vec![0.0f32; k * n];
        g.bench_function(BenchmarkId::new("tn", format!("{k}x{m}x{n}")), |bch| {
            bch.iter(|| {
                gemm(
                    k,
                    m,
                    n,
                    1.0,
                    &at,
                    (1, k),
                    &cbuf,
                    (n, 1),
                    1.0,
                    &mut cw,
                    (n, 1),
                )
            })
        });
        // d W^T with W stored k x n... read through its strides: the backward pass's
        // input-gradient product (c[m x k] = d[m x n] W^T).
        let mut cx = vec![0.0f32; m * k];
        g.bench_function(BenchmarkId::new("nt", format!("{m}x{n}x{k}")), |bch| {
            bch.iter(|| {
                gemm(
                    m,
                    n,
                    k,
                    1.0,
                    &cbuf,
                    (n, 1),
                    &b,
                    (1, n),
                    0.0,
                    &mut cx,
                    (k, 1),
                )
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group("activation");
    for len in [256usize, 4096] {
        let mut v: Vec<f32> = (0..len).map(|_| normal(&mut rng) as f32).collect();
        g.throughput(Throughput::Elements(len as u64));
        g.bench_function(BenchmarkId::new("tanh", len), |bch| {
            bch.iter(|| {
                // Keep the inputs spread: tanh of tanh shrinks towards 0.
                v.iter_mut().for_each(|x| *x *= 3.0);
                rlrig_nn::nn::tanh_in_place(std::hint::black_box(&mut v));
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = shapes;
    config = Criterion::default().warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1));
    targets = gemm_shapes
}
/// The Nature CNN of the Atari presets (4 x 84 x 84 bytes -> 32/64/64 convolutions ->
/// 512 -> 7 outputs), on one thread: inference on 16 rows (A2C's envs) and a training
/// pass (forward and backward) on 80 rows (A2C's 16 envs x 5 steps).
fn nature_cnn(c: &mut Criterion) {
    use rlrig_nn::conv::{ConvCache, ConvNet, NATURE};
    let net = ConvNet::tower((4, 84, 84), &NATURE, 0, &[512], 7, 0).with_scale(1.0 / 255.0);
    let mut rng = Rng::stream(2, Purpose::Bench, 0);
    let mut params = vec![0.0; net.end()];
    net.init(&mut params, std::f32::consts::SQRT_2, 1.0, &mut rng);
    let mut g = c.benchmark_group("nature_cnn");
    for (name, batch) in [("inference", 16usize), ("train_pass", 80)] {
        let x: Vec<f32> = (0..batch * net.input_dim())
            .map(|_| (rng.below(256)) as f32)
            .collect();
        let dout: Vec<f32> = (0..batch * 7).map(|_| normal(&mut rng) as f32).collect();
        let mut cache = ConvCache::default();
        let mut grads = vec![0.0; params.len()];
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_function(BenchmarkId::new(name, batch), |b| {
            b.iter(|| {
                std::hint::black_box(net.forward(&params, &x, batch, &mut cache));
                if name == "train_pass" {
                    net.backward(&params, &mut grads, &dout, &mut cache);
                }
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = cnn;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    targets = nature_cnn
}
criterion_main!(mlp, shapes, cnn);
