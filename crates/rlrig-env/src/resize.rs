//! The Atari preprocessing's shrink: a 210 x 160 grayscale screen to 84 x 84 exactly as
//! `cv2.resize(src, (84, 84), interpolation=cv2.INTER_AREA)` computes it, bit for bit.
//!
//! OpenCV's INTER_AREA for a non-integer shrink is separable: each source row is shrunk
//! horizontally (per destination pixel `0 + p0*w0 + p1*w1 + p2*w2` in f32, in OpenCV's
//! order), then rows are weighted and summed in OpenCV's order (`beta0 * r0`, then
//! `+= beta * r`) and rounded half to even. Every version here computes those same
//! operations in that order (Rust never fuses a multiply and an add), so they agree
//! to the bit; they differ only in how the pixels reach the vector lanes.
//!
//! The horizontal pass runs on eight source rows at a time with the rows in the lanes,
//! so each tap is one vector load whatever its column; rows shrunk so far wait in a
//! ring of two groups until every source row of a destination row is in, so the
//! intermediate image is never stored whole.

/// Source height and width, destination side (the Atari screen and Gymnasium's 84).
pub const HEIGHT: usize = 210;
pub const WIDTH: usize = 160;
pub const SIZE: usize = 84;

/// Rows per group: the lanes of an AVX2 vector.
const L: usize = 8;
/// Destination columns padded to whole groups of lanes (the padding has zero taps).
const PAD: usize = SIZE.next_multiple_of(L);
/// Taps of one destination column (a horizontal shrink by less than 3 needs at most 3).
const TAPS: usize = 3;
/// Shrunk rows kept: the group being made and the one before it.
const RING: usize = 2 * L;

/// OpenCV's `computeResizeAreaTab` for a non-integer shrink of `src` pixels to `dst`:
/// (destination, source, weight) in OpenCV's order. Each destination cell covers
/// `src / dst` source pixels; partial pixels at its ends weigh their covered fraction;
/// weights are divided by the cell's width and kept as f32.
fn area_table(src: usize, dst: usize) -> Vec<(usize, usize, f32)> {
    let scale = 1.0 / (dst as f64 / src as f64);
    let mut tab = Vec::new();
    for d in 0..dst {
        let f1 = d as f64 * scale;
        let f2 = f1 + scale;
        let cell = scale.min(src as f64 - f1);
        let s2 = (f2.floor() as usize).min(src - 1);
        let s1 = (f1.ceil() as usize).min(s2);
        if s1 as f64 - f1 > 1e-3 {
            tab.push((d, s1 - 1, ((s1 as f64 - f1) / cell) as f32));
        }
        for s in s1..s2 {
            tab.push((d, s, (1.0 / cell) as f32));
        }
        if f2 - s2 as f64 > 1e-3 {
            tab.push((d, s2, ((f2 - s2 as f64).min(1.0).min(cell) / cell) as f32));
        }
    }
    tab
}

/// The tables regrouped per destination column (zero-weight padded to `TAPS`) and per
/// destination row.
struct Tables {
    x_src: [[usize; PAD]; TAPS],
    x_w: [[f32; PAD]; TAPS],
    /// Per destination row: its (source row, weight) entries in OpenCV's order.
    y: Vec<Vec<(usize, f32)>>,
}

fn tables() -> &'static Tables {
    static T: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut t = Tables {
            x_src: [[0; PAD]; TAPS],
            x_w: [[0.0; PAD]; TAPS],
            y: vec![Vec::new(); SIZE],
        };
        let mut taps = [0usize; SIZE];
        for (d, src, w) in area_table(WIDTH, SIZE) {
            assert!(
                taps[d] < TAPS,
                "INTER_AREA column {d} has more than {TAPS} taps"
            );
            t.x_src[taps[d]][d] = src;
            t.x_w[taps[d]][d] = w;
            taps[d] += 1;
        }
        for (d, src, w) in area_table(HEIGHT, SIZE) {
            t.y[d].push((src, w));
        }
        for e in &t.y {
            // The ring holds the last two groups: a destination row's sources must fit.
            assert!(
                e.last().unwrap().0 - e[0].0 < L,
                "INTER_AREA rows span too far"
            );
        }
        t
    })
}

/// `src` (HEIGHT x WIDTH) shrunk to SIZE x SIZE into `dst` as OpenCV's INTER_AREA does
/// (module docs), on the fastest version this CPU runs.
///
/// # Panics
/// If `src` is not HEIGHT * WIDTH bytes or `dst` not SIZE * SIZE.
pub fn resize_area(src: &[u8], dst: &mut [u8]) {
    assert_eq!(src.len(), HEIGHT * WIDTH, "resize_area: the source's size");
    assert_eq!(
        dst.len(),
        SIZE * SIZE,
        "resize_area: the destination's size"
    );
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked on the line above), the one feature
        // `resize_avx2` is compiled for.
        return unsafe { resize_avx2(src, dst) };
    }
    resize_portable(src, dst)
}

/// The same shrink in plain Rust: the version every other one must equal, and the one
/// `resize_area` runs where there is no AVX2 (x86-64's baseline SSE; NEON on aarch64).
#[multiversion::multiversion(targets("aarch64+neon"))]
pub fn resize_portable(src: &[u8], dst: &mut [u8]) {
    assert_eq!(
        src.len(),
        HEIGHT * WIDTH,
        "resize_portable: the source's size"
    );
    assert_eq!(
        dst.len(),
        SIZE * SIZE,
        "resize_portable: the destination's size"
    );
    let mut cols = [[0f32; L]; WIDTH];
    shrink(
        src,
        dst,
        |group, t, rows| horizontal_portable(group, t, &mut cols, rows),
        |sum, out| {
            for (o, s) in out.iter_mut().zip(sum) {
                // Round half to even (cvRound) without a libm call: for 0 <= s < 2^23,
                // adding and subtracting 2^23 in f32 rounds to an integer in the default
                // mode.
                const MAGIC: f32 = 8_388_608.0;
                *o = ((s.max(0.0) + MAGIC) - MAGIC).min(255.0) as u8;
            }
        },
    )
}

/// The driver every version shares: groups of eight source rows shrunk horizontally
/// into a ring of two groups, each destination row summed as soon as its source rows
/// are in and handed to `round`. `horizontal` gets eight source rows (zero rows past
/// the screen's end) and the ring's eight rows to fill; `round` a destination row's
/// sums (SIZE of them, then padding) and its bytes. Inlined into each version so all
/// of it is compiled for that version's instruction set.
#[inline(always)]
fn shrink(
    src: &[u8],
    dst: &mut [u8],
    mut horizontal: impl FnMut(&[u8; L * WIDTH], &Tables, &mut [[f32; PAD]]),
    round: impl Fn(&[f32; PAD], &mut [u8]),
) {
    let t = tables();
    let mut ring = [[0f32; PAD]; RING];
    let mut y = 0;
    for (g, rows) in src.chunks(L * WIDTH).enumerate() {
        let base = (g % 2) * L;
        match rows.try_into() {
            Ok(group) => horizontal(group, t, &mut ring[base..base + L]),
            Err(_) => {
                // The last group's rows past the screen are zero; no destination row
                // reads them.
                let mut group = [0u8; L * WIDTH];
                group[..rows.len()].copy_from_slice(rows);
                horizontal(&group, t, &mut ring[base..base + L]);
            }
        }
        let end = (g + 1) * L;
        while y < SIZE && t.y[y].last().unwrap().0 < end {
            let entries = &t.y[y];
            let (s0, b0) = entries[0];
            let mut sum = [0f32; PAD];
            for (s, r) in sum.iter_mut().zip(&ring[s0 % RING]) {
                *s = b0 * r;
            }
            for &(sy, beta) in &entries[1..] {
                for (s, r) in sum.iter_mut().zip(&ring[sy % RING]) {
                    *s += beta * r;
                }
            }
            round(&sum, &mut dst[y * SIZE..(y + 1) * SIZE]);
            y += 1;
        }
    }
}

#[inline(always)]
fn horizontal_portable(
    group: &[u8; L * WIDTH],
    t: &Tables,
    cols: &mut [[f32; L]; WIDTH],
    rows: &mut [[f32; PAD]],
) {
    for (lane, row) in group.chunks_exact(WIDTH).enumerate() {
        for (c, &b) in cols.iter_mut().zip(row) {
            c[lane] = f32::from(b);
        }
    }
    for d in 0..PAD {
        let (c0, w0) = (&cols[t.x_src[0][d]], t.x_w[0][d]);
        let mut acc = [0f32; L];
        for l in 0..L {
            acc[l] = c0[l] * w0;
        }
        for k in 1..TAPS {
            let (c, w) = (&cols[t.x_src[k][d]], t.x_w[k][d]);
            for l in 0..L {
                acc[l] += c[l] * w;
            }
        }
        for l in 0..L {
            rows[l][d] = acc[l];
        }
    }
}

/// The shrink with the portable version's two transposes (bytes into row lanes, sums
/// back into rows) done eight by eight in shuffles instead of one scalar store per
/// value, and the rounding done by the vector unit: `cvtps2dq` rounds half to even in
/// the default mode (cvRound), `packus` saturates to 0..=255.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn resize_avx2(src: &[u8], dst: &mut [u8]) {
    use std::arch::x86_64::*;
    let mut cols = [_mm256_setzero_ps(); WIDTH];
    let mut out = [_mm256_setzero_ps(); PAD];
    let horizontal = |group: &[u8; L * WIDTH], t: &Tables, rows: &mut [[f32; PAD]]| {
        for c0 in (0..WIDTH).step_by(L) {
            let row = |r: usize| {
                let b: [u8; 8] = group[r * WIDTH + c0..][..8].try_into().unwrap();
                let b = _mm_cvtsi64_si128(i64::from_le_bytes(b));
                _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b))
            };
            let v = crate::simd::transpose8x8([
                row(0),
                row(1),
                row(2),
                row(3),
                row(4),
                row(5),
                row(6),
                row(7),
            ]);
            cols[c0..c0 + L].copy_from_slice(&v);
        }
        for (d, o) in out.iter_mut().enumerate() {
            let tap = |k: usize| _mm256_mul_ps(cols[t.x_src[k][d]], _mm256_set1_ps(t.x_w[k][d]));
            let mut acc = tap(0);
            for k in 1..TAPS {
                acc = _mm256_add_ps(acc, tap(k));
            }
            *o = acc;
        }
        for d0 in (0..PAD).step_by(L) {
            let v = crate::simd::transpose8x8(out[d0..d0 + L].try_into().unwrap());
            for (row, v) in rows.iter_mut().zip(v) {
                let dst = &mut row[d0..d0 + L];
                // SAFETY: `dst` is 8 f32 of a live, exclusively borrowed slice; an
                // unaligned store of one 8-float vector writes exactly those.
                unsafe { _mm256_storeu_ps(dst.as_mut_ptr(), v) };
            }
        }
    };
    let round = |sum: &[f32; PAD], out: &mut [u8]| {
        let mut bytes = [0u8; PAD.next_multiple_of(4 * L)];
        for (x0, chunk) in (0..PAD).step_by(4 * L).zip(bytes.chunks_exact_mut(4 * L)) {
            let int = |k: usize| {
                let x = x0 + k * L;
                if x < PAD {
                    let s = &sum[x..x + L];
                    // SAFETY: `s` is 8 f32 of a live slice; an unaligned load reads
                    // exactly those.
                    _mm256_cvtps_epi32(unsafe { _mm256_loadu_ps(s.as_ptr()) })
                } else {
                    _mm256_setzero_si256()
                }
            };
            // packs work within 128-bit halves: the permute puts the 32 bytes in order.
            let w01 = _mm256_packus_epi32(int(0), int(1));
            let w23 = _mm256_packus_epi32(int(2), int(3));
            let b = _mm256_packus_epi16(w01, w23);
            let b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            // SAFETY: `chunk` is 32 bytes of a live, exclusively borrowed array; an
            // unaligned store of one 32-byte vector writes exactly those.
            unsafe { _mm256_storeu_si256(chunk.as_mut_ptr().cast(), b) };
        }
        out.copy_from_slice(&bytes[..SIZE]);
    };
    shrink(src, dst, horizontal, round)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// OpenCV's INTER_AREA as its definition reads, pixel by pixel from the tables.
    fn reference(src: &[u8]) -> Vec<u8> {
        let mut rows = vec![[0f32; SIZE]; HEIGHT];
        let xs = area_table(WIDTH, SIZE);
        for (r, row) in rows.iter_mut().enumerate() {
            let mut first = [true; SIZE];
            for &(d, s, w) in &xs {
                let p = f32::from(src[r * WIDTH + s]) * w;
                row[d] = if first[d] { p } else { row[d] + p };
                first[d] = false;
            }
        }
        let mut sum = vec![[0f32; SIZE]; SIZE];
        let mut first = [true; SIZE];
        for (d, s, beta) in area_table(HEIGHT, SIZE) {
            for x in 0..SIZE {
                let p = beta * rows[s][x];
                sum[d][x] = if first[d] { p } else { sum[d][x] + p };
            }
            first[d] = false;
        }
        sum.iter()
            .flatten()
            .map(|&s| s.round_ties_even().clamp(0.0, 255.0) as u8)
            .collect()
    }

    fn check(src: &[u8]) {
        let want = reference(src);
        let mut got = vec![0u8; SIZE * SIZE];
        resize_portable(src, &mut got);
        assert_eq!(got, want, "the portable version");
        got.fill(0);
        resize_area(src, &mut got);
        assert_eq!(got, want, "the dispatched version");
    }

    #[test]
    fn flat_and_extreme_screens_shrink_to_the_reference() {
        for v in [0u8, 1, 127, 128, 254, 255] {
            check(&[v; HEIGHT * WIDTH]);
        }
        let stripes: Vec<u8> = (0..HEIGHT * WIDTH)
            .map(|i| if i % 3 == 0 { 255 } else { 0 })
            .collect();
        check(&stripes);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(23), ..ProptestConfig::default() })]

        /// Every version equals OpenCV's definition on any screen (noise, and blocks of a
        /// few grey levels as Atari screens have).
        #[test]
        fn any_screen_shrinks_to_the_reference(
            noise in proptest::collection::vec(any::<u8>(), HEIGHT * WIDTH),
            levels in proptest::collection::vec(any::<u8>(), 4),
            block in 1usize..16,
        ) {
            check(&noise);
            let blocks: Vec<u8> = (0..HEIGHT * WIDTH)
                .map(|i| levels[((i / WIDTH / block) + (i % WIDTH / block)) % 4])
                .collect();
            check(&blocks);
        }
    }
}
