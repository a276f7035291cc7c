//! `cargo bench -p rlrig-env --bench trig`: sin and cos of 4096 angles spread like
//! Acrobot's (-8..5 rad), per element: libm, the certified wide sin/cos (libm's bits),
//! and the opt-in fast one. Compiled for the build's target like the kernels' default
//! path; `RUSTFLAGS="-C target-cpu=native"` gives the FMA/AVX2 build the kernels pick.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlrig_env::trig::{fast_sin_cos_lanes, wide_sin_cos_lanes};
use rlrig_env::{Purpose, Rng};

const LANES: usize = 16;

/// A `*_sin_cos_lanes` function: `(sin, cos)` of `LANES` angles.
type SinCosLanes = fn(&[f64; LANES]) -> ([f64; LANES], [f64; LANES]);

fn benches(c: &mut Criterion) {
    let mut rng = Rng::stream(1, Purpose::User, 0);
    let xs: Vec<f64> = (0..4096).map(|_| rng.uniform(-8.0, 5.0)).collect();
    let mut out = vec![0.0; 2 * xs.len()];
    let mut g = c.benchmark_group("sin_cos");
    g.throughput(Throughput::Elements(xs.len() as u64));
    g.bench_function("libm", |b| {
        b.iter(|| {
            for (&x, o) in xs.iter().zip(out.chunks_exact_mut(2)) {
                (o[0], o[1]) = x.sin_cos();
            }
            std::hint::black_box(&mut out);
        })
    });
    let mut lanes = |name: &str, f: SinCosLanes| {
        g.bench_function(name, |b| {
            b.iter(|| {
                for (x, o) in xs.chunks_exact(LANES).zip(out.chunks_exact_mut(2 * LANES)) {
                    let (s, c) = f(x.try_into().unwrap());
                    o[..LANES].copy_from_slice(&s);
                    o[LANES..].copy_from_slice(&c);
                }
                std::hint::black_box(&mut out);
            })
        });
    };
    lanes("wide_certified", wide_sin_cos_lanes::<LANES>);
    lanes("fast", fast_sin_cos_lanes::<LANES>);
    g.finish();
}

criterion_group! {
    name = trig;
    config = Criterion::default().warm_up_time(std::time::Duration::from_secs(1)).measurement_time(std::time::Duration::from_secs(3));
    targets = benches
}
criterion_main!(trig);
