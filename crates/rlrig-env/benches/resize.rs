//! `cargo bench -p rlrig-env --bench resize`: the Atari preprocessing's kernels on one
//! screen (210 x 160), per call, in the version this CPU runs (AVX2 on x86-64 that has
//! it) and the portable one (what a CPU without AVX2 runs: SSE, x86-64's baseline; NEON
//! on aarch64): the shrink to 84 x 84 as OpenCV's INTER_AREA does, and the palette
//! lookup to grayscale max-pooled with the skip's other screen.

use criterion::{Criterion, criterion_group, criterion_main};
use rlrig_env::palette::{COLOURS, gray, gray_portable};
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
    // The same blocks as TIA colours (even palette indices) through a random table.
    let table: [u8; COLOURS] = std::array::from_fn(|_| (rng.next_u32() >> 24) as u8);
    let screen: Vec<u8> = src.iter().map(|&v| v & !1).collect();
    let mut out = vec![0u8; HEIGHT * WIDTH];
    let mut g = c.benchmark_group("palette_gray_pooled");
    g.bench_function("dispatched", |b| {
        b.iter(|| gray(&table, &screen, Some(&src), &mut out))
    });
    g.bench_function("portable", |b| {
        b.iter(|| gray_portable(&table, &screen, Some(&src), &mut out))
    });
    g.finish();
}

criterion_group!(resize, benches);
criterion_main!(resize);
