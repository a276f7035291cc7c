//! Vector helpers shared by the env crate's kernels (the Atari resize) and the learner's
//! (`rlrig-learn`'s matrix kernel).

/// The 8 x 8 transpose of eight AVX vectors (row `i` of the result holds element `i` of
/// every input) in 24 shuffles: pairs of rows interleaved, then pairs of pairs, then the
/// 128-bit halves exchanged.
///
/// # Safety
/// Outside code compiled with AVX, the caller must know that the CPU has AVX (for
/// example from `is_x86_feature_detected!("avx")`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
pub fn transpose8x8(a: [std::arch::x86_64::__m256; 8]) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    let mut t = a;
    for i in 0..4 {
        t[2 * i] = _mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]);
    }
    let mut u = t;
    for h in [0, 4] {
        for j in 0..2 {
            let (x, y) = (t[h + j], t[h + j + 2]);
            u[h + 2 * j] = _mm256_shuffle_ps::<0b01_00_01_00>(x, y);
            u[h + 2 * j + 1] = _mm256_shuffle_ps::<0b11_10_11_10>(x, y);
        }
    }
    let mut out = u;
    for j in 0..4 {
        out[j] = _mm256_permute2f128_ps::<0x20>(u[j], u[j + 4]);
        out[j + 4] = _mm256_permute2f128_ps::<0x31>(u[j], u[j + 4]);
    }
    out
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use std::arch::x86_64::*;

    #[test]
    fn transpose8x8_swaps_rows_and_columns() {
        if !std::arch::is_x86_feature_detected!("avx") {
            return;
        }
        let m: [[f32; 8]; 8] = std::array::from_fn(|r| std::array::from_fn(|c| (r * 8 + c) as f32));
        // SAFETY: the CPU has AVX (checked above); each load and store reads or writes the
        // 8 f32 of one row of a local array.
        let t = unsafe {
            let v = transpose8x8(m.map(|row| _mm256_loadu_ps(row.as_ptr())));
            v.map(|x| {
                let mut row = [0f32; 8];
                _mm256_storeu_ps(row.as_mut_ptr(), x);
                row
            })
        };
        for r in 0..8 {
            for c in 0..8 {
                assert_eq!(t[r][c], m[c][r], "element ({r}, {c})");
            }
        }
    }
}
