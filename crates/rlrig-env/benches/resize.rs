//! `cargo bench -p rlrig-env --bench resize`: one Atari screen (210 x 160) shrunk to
//! 84 x 84 as OpenCV's INTER_AREA does, per call: the version `resize_area` picks on
//! this CPU (AVX2 shuffles on x86-64 that has it) and the portable one (what a CPU
//! without AVX2 runs: SSE, x86-64's baseline; NEON on aarch64).

use criterion::{Criterion, criterion_group, criterion_main};
use rlrig_env::resize::{HEIGHT, SIZE, WIDTH, resize_area, resize_portable};
use rlrig_env::{Purpose, Rng};

fn benches(c: &mut Criterion) {
    let mut rng = Rng::stream(1, Purpose::User, 0);
    // Screens of a few grey levels in blocks, as Atari frames are.
    let levels: Vec<u8> = (0..6).map(|_| (rng.next_u32() >> 24) as u8).collect();
    let src: Vec<u8> = (0..HEIGHT * WIDTH)
        .map(|i| levels[(i / WIDTH / 7 + i % WIDTH / 5) % levels.len()])
        .collect();
    let mut dst = vec![0u8; SIZE * SIZE];
    let mut g = c.benchmark_group("resize_area");
    g.bench_function("dispatched", |b| b.iter(|| resize_area(&src, &mut dst)));
    g.bench_function("portable", |b| b.iter(|| resize_portable(&src, &mut dst)));
    g.finish();
}

criterion_group!(resize, benches);
criterion_main!(resize);
