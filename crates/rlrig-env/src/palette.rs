//! The Atari preprocessing's colour lookup: a screen of palette indices (TIA colours, even
//! bytes) to grayscale through a 128-entry table (one per colour), optionally max-pooled
//! with another grayscale screen on the way (Gymnasium's max over a skip's last two
//! frames).
//!
//! A table lookup per pixel is ~2 cycles in scalar code (ALE's `getScreenGrayscale` and a
//! plain Rust loop alike: ~9 % of a Pong step, two screens a step); the AVX2 version looks
//! up 32 pixels at once with byte shuffles over the table's eight 16-byte pieces.

/// Entries of a palette table: one per TIA colour (palette index `2k`).
pub const COLOURS: usize = 128;

/// `out[i] = table[screen[i] / 2]`, or with `pool`, `max(table[screen[i] / 2], pool[i])`,
/// on the fastest version this CPU runs. The index's lowest bit is ignored (screens hold
/// even indices only).
///
/// # Panics
/// If `screen`, `pool` and `out` differ in length.
pub fn gray(table: &[u8; COLOURS], screen: &[u8], pool: Option<&[u8]>, out: &mut [u8]) {
    assert_eq!(
        screen.len(),
        out.len(),
        "palette::gray: screen and output sizes"
    );
    if let Some(p) = pool {
        assert_eq!(p.len(), out.len(), "palette::gray: pooled screen's size");
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked on the line above), the one feature
        // `gray_avx2` is compiled for; the lengths are checked above.
        return unsafe { gray_avx2(table, screen, pool, out) };
    }
    gray_portable(table, screen, pool, out)
}

/// The lookup in plain Rust: what every other version must equal.
pub fn gray_portable(table: &[u8; COLOURS], screen: &[u8], pool: Option<&[u8]>, out: &mut [u8]) {
    match pool {
        Some(p) => {
            for ((o, &v), &q) in out.iter_mut().zip(screen).zip(p) {
                *o = table[usize::from(v >> 1)].max(q);
            }
        }
        None => {
            for (o, &v) in out.iter_mut().zip(screen) {
                *o = table[usize::from(v >> 1)];
            }
        }
    }
}

/// 32 pixels at a time: the index halved, then for each 16-entry piece `j` of the table
/// a `pshufb` whose selector is `index - 16 j` pushed by a saturating `+ 0x70` into
/// 0x70..=0x7f when it falls in the piece (its low nibble picks the entry) and to 0x80 or
/// above otherwise (`pshufb` then gives 0), the eight results or-ed together.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn gray_avx2(table: &[u8; COLOURS], screen: &[u8], pool: Option<&[u8]>, out: &mut [u8]) {
    use std::arch::x86_64::*;
    const W: usize = 32;
    let pieces: [__m256i; COLOURS / 16] = std::array::from_fn(|j| {
        let piece = &table[16 * j..16 * (j + 1)];
        // SAFETY: `piece` is 16 bytes of a live array; an unaligned load reads exactly those.
        _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(piece.as_ptr().cast()) })
    });
    let body = out.len() / W * W;
    for i in (0..body).step_by(W) {
        let v = &screen[i..i + W];
        // SAFETY: `v` is 32 bytes of a live slice; an unaligned load reads exactly those.
        let v = unsafe { _mm256_loadu_si256(v.as_ptr().cast()) };
        // Bytes halved: a 16-bit shift moves the next byte's lowest bit into bit 7,
        // which the mask clears.
        let index = _mm256_and_si256(_mm256_srli_epi16::<1>(v), _mm256_set1_epi8(0x7f));
        let mut g = _mm256_setzero_si256();
        for (j, piece) in pieces.iter().enumerate() {
            let sel = _mm256_sub_epi8(index, _mm256_set1_epi8(16 * j as i8));
            let sel = _mm256_adds_epu8(sel, _mm256_set1_epi8(0x70));
            g = _mm256_or_si256(g, _mm256_shuffle_epi8(*piece, sel));
        }
        if let Some(p) = pool {
            let p = &p[i..i + W];
            // SAFETY: as for `v`.
            g = _mm256_max_epu8(g, unsafe { _mm256_loadu_si256(p.as_ptr().cast()) });
        }
        let o = &mut out[i..i + W];
        // SAFETY: `o` is 32 bytes of a live, exclusively borrowed slice; an unaligned
        // store of one 32-byte vector writes exactly those.
        unsafe { _mm256_storeu_si256(o.as_mut_ptr().cast(), g) };
    }
    gray_portable(
        table,
        &screen[body..],
        pool.map(|p| &p[body..]),
        &mut out[body..],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every version equals the plain lookup, for any table, any screen length (a
        /// tail that is not whole vectors) and with or without the pooled screen; odd
        /// indices read their even neighbour's entry in both.
        #[test]
        fn every_version_looks_up_as_the_plain_loop(
            table in proptest::collection::vec(any::<u8>(), COLOURS),
            screen in proptest::collection::vec(any::<u8>(), 0..200),
            other in proptest::collection::vec(any::<u8>(), 200),
            pooled in any::<bool>(),
        ) {
            let table: [u8; COLOURS] = table.try_into().unwrap();
            let pool = pooled.then(|| &other[..screen.len()]);
            let mut want = vec![0u8; screen.len()];
            for (i, (w, &v)) in want.iter_mut().zip(&screen).enumerate() {
                let g = table[usize::from(v) / 2];
                *w = pool.map_or(g, |p| g.max(p[i]));
            }
            let mut got = vec![0u8; screen.len()];
            gray(&table, &screen, pool, &mut got);
            prop_assert_eq!(&got, &want);
            let mut got = vec![0u8; screen.len()];
            gray_portable(&table, &screen, pool, &mut got);
            prop_assert_eq!(&got, &want);
        }
    }
}
