use super::*;
use proptest::prelude::{Just, prop_oneof};
use rlrig_env::Purpose;

#[test]
fn tanh_is_close_to_libm_everywhere() {
    let mut worst = 0.0f32;
    let mut x = -12.0f32;
    while x < 12.0 {
        worst = worst.max((tanh(x) - x.tanh()).abs());
        x += 1e-4;
    }
    assert!(worst < 2e-7, "worst abs error {worst}");
    assert_eq!(tanh(0.0), 0.0);
    assert_eq!(tanh(100.0), 1.0);
    assert_eq!(tanh(-100.0), -1.0);
    assert!(tanh(1e-30) > 0.0);
    // Small inputs keep their relative precision (a few ulp).
    for x in [1e-30f32, 1e-6, 1e-3, 0.05, 0.17, 0.18, 0.3] {
        let rel = (f64::from(tanh(x)) - f64::from(x).tanh()).abs() / f64::from(x).tanh();
        assert!(rel < 4e-7, "tanh({x}): relative error {rel}");
    }
}

#[test]
fn exp_is_close_to_libm_everywhere() {
    let mut worst = 0.0f64;
    let mut x = -87.0f32;
    while x < 88.0 {
        let want = f64::from(x).exp();
        worst = worst.max((f64::from(exp(x)) - want).abs() / want);
        x += 1.3e-3;
    }
    assert!(worst < 4e-7, "worst relative error {worst}");
    assert_eq!(exp(0.0), 1.0);
    for x in [1e-30f32, -1e-7, 1e-3, 0.34, 0.35, 1.0, 20.0, -20.0] {
        let rel = (f64::from(exp(x)) - f64::from(x).exp()).abs() / f64::from(x).exp();
        assert!(rel < 2.5e-7, "exp({x}): relative error {rel}");
    }
    // Clamped: finite at both ends, and NaN stays NaN.
    assert!(exp(1000.0).is_finite() && exp(1000.0) > 1e38);
    assert!(exp(-1000.0) >= 0.0 && exp(-1000.0) < 1e-37);
    assert!(exp(f32::NAN).is_nan());
}

/// Every vectorised loop this CPU runs (AVX-512, AVX2 or NEON) and the scalar function
/// (libm's fmaf) give the same bits, for `tanh` and `exp`: what keeps runs equal across
/// CPUs. 6,001 values (not a multiple of any block) cover the blocks and the tail.
#[test]
fn vector_loops_equal_scalar_bits() {
    type Loop = fn(super::kernel::Isa, &mut [f32]);
    type Case = (&'static str, fn(f32) -> f32, Loop, fn(&mut [f32]), f32);
    let cases: [Case; 2] = [
        ("tanh", tanh, super::tanh_on, tanh_in_place, 0.00417),
        ("exp", exp, super::exp_on, exp_in_place, 0.0291),
    ];
    for (name, one, on, in_place, step) in cases {
        let xs: Vec<f32> = (-3000..=3000).map(|i| i as f32 * step).collect();
        for isa in super::kernel::Isa::available() {
            let mut v = xs.clone();
            on(isa, &mut v);
            for (x, y) in xs.iter().zip(&v) {
                assert_eq!(one(*x).to_bits(), y.to_bits(), "{isa:?}: {name}({x})");
            }
        }
        let mut v = xs.clone();
        in_place(&mut v);
        assert!(
            xs.iter()
                .zip(&v)
                .all(|(x, y)| one(*x).to_bits() == y.to_bits()),
            "{name}_in_place"
        );
    }
}

fn naive(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
        }
    }
    c
}

proptest::proptest! {
    #[test]
    // Sums on both sides of the register kernel's longest (KERNEL_MAX_K = 1,024).
    fn gemm_matches_naive_including_transposed_strides(m in 1usize..11, k in prop_oneof![0usize..9, 1000usize..1050], n in prop_oneof![1usize..9, Just(64usize), 250usize..300, 2000usize..2100], seed in 0u64..1000) {
        let mut rng = Rng::stream(seed, Purpose::User, 0);
        let a: Vec<f32> = (0..m * k).map(|_| normal(&mut rng) as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|_| normal(&mut rng) as f32).collect();
        let want = naive(m, k, n, &a, &b);
        let mut c = vec![0.0; m * n];
        gemm(m, k, n, 1.0, &a, (k, 1), &b, (n, 1), 0.0, &mut c, (n, 1));
        // f32 sums of k products of normals: rounding grows with the sum's length.
        let tol = 1e-4 + 2e-6 * k as f32;
        for (x, y) in c.iter().zip(&want) {
            proptest::prop_assert!((x - y).abs() < tol, "{x} vs {y}");
        }
        // a^T stored column-major: a_t[t*m + i] = a[i*k + t].
        let mut a_t = vec![0.0; m * k];
        for i in 0..m { for t in 0..k { a_t[t * m + i] = a[i * k + t]; } }
        let mut c2 = vec![0.0; m * n];
        gemm(m, k, n, 1.0, &a_t, (1, m), &b, (n, 1), 0.0, &mut c2, (n, 1));
        for (x, y) in c2.iter().zip(&want) {
            proptest::prop_assert!((x - y).abs() < tol, "{x} vs {y}");
        }
    }
}

#[test]
#[should_panic(expected = "gemm: b too short")]
fn gemm_rejects_short_operands() {
    let mut c = vec![0.0; 4];
    gemm(
        2,
        2,
        2,
        1.0,
        &[1.0; 4],
        (2, 1),
        &[1.0; 3],
        (2, 1),
        0.0,
        &mut c,
        (2, 1),
    );
}

#[test]
fn orthogonal_rows_or_columns_are_orthonormal() {
    let mut rng = Rng::stream(1, Purpose::User, 0);
    for (r, c) in [(4, 64), (64, 64), (64, 2)] {
        let mut w = vec![0.0; r * c];
        orthogonal(&mut w, r, c, 1.0, &mut rng);
        let (short, long, by_rows) = if r < c { (r, c, true) } else { (c, r, false) };
        for i in 0..short {
            for j in 0..short {
                let dot: f32 = (0..long)
                    .map(|t| {
                        if by_rows {
                            w[i * c + t] * w[j * c + t]
                        } else {
                            w[t * c + i] * w[t * c + j]
                        }
                    })
                    .sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((dot - want).abs() < 1e-4, "{r}x{c}: <{i},{j}> = {dot}");
            }
        }
    }
}

/// Loss = sum(out * g) for fixed g, so d loss / d out = g; compare the analytic
/// parameter gradient with central differences in f64-accumulated loss.
#[test]
fn backward_matches_finite_differences() {
    let mlp = Mlp::new(&[3, 5, 4, 2], 0);
    let mut rng = Rng::stream(2, Purpose::User, 0);
    let mut params = vec![0.0; mlp.num_params()];
    mlp.init(&mut params, 1.4, 1.0, &mut rng);
    for p in params.iter_mut() {
        *p += 0.1 * normal(&mut rng) as f32;
    }
    let batch = 6;
    let x: Vec<f32> = (0..batch * 3).map(|_| normal(&mut rng) as f32).collect();
    let g: Vec<f32> = (0..batch * 2).map(|_| normal(&mut rng) as f32).collect();
    assert_backward_matches_central_differences(
        &params,
        &g,
        (1e-2, 2e-3),
        |p, cache: &mut MlpCache| mlp.forward(p, &x, batch, cache).to_vec(),
        |p, grads, cache| mlp.backward(p, grads, &g, cache),
    );
}

/// The same check for ReLU hidden layers and for the input gradient (the critic-to-
/// action path of DDPG/TD3/SAC), with parameter gradients switched off.
#[test]
fn input_gradient_matches_finite_differences_with_relu() {
    let mlp = Mlp::with_activation(&[4, 7, 6, 1], 0, Activation::Relu);
    let mut rng = Rng::stream(3, Purpose::User, 0);
    let mut params = vec![0.0; mlp.num_params()];
    mlp.init_torch_default(&mut params, &mut rng);
    let batch = 5;
    let x: Vec<f32> = (0..batch * 4).map(|_| normal(&mut rng) as f32).collect();
    let g: Vec<f32> = (0..batch).map(|_| normal(&mut rng) as f32).collect();
    let mut cache = MlpCache::default();
    let loss = |p: &[f32], x: &[f32], cache: &mut MlpCache| -> f64 {
        mlp.forward(p, x, batch, cache)
            .iter()
            .zip(&g)
            .map(|(o, g)| f64::from(*o) * f64::from(*g))
            .sum()
    };
    loss(&params, &x, &mut cache);
    let mut dx = vec![0.0; x.len()];
    mlp.backward_full(&params, None, &g, &mut cache, Some(&mut dx));
    assert_matches_central_differences(&x, &dx, 1e-3, 2e-3, |xp| loss(&params, xp, &mut cache));
    // Parameter gradients with ReLU, and both at once agree with each alone.
    loss(&params, &x, &mut cache);
    let mut grads = vec![0.0; params.len()];
    let mut dx2 = vec![0.0; x.len()];
    mlp.backward_full(&params, Some(&mut grads), &g, &mut cache, Some(&mut dx2));
    assert_eq!(dx, dx2);
    assert_matches_central_differences(&params, &grads, 1e-3, 2e-3, |p| loss(p, &x, &mut cache));
}

/// Writing a chunk's gradients (`backward_set`, the kernel's write mode) gives the
/// bits of zeroing them and adding, whatever the buffer held, and leaves the rest of
/// the buffer alone.
#[test]
fn backward_set_equals_zeroing_then_adding() {
    let mut rng = Rng::stream(5, Purpose::User, 0);
    let cases = [
        (&[4usize, 64, 64, 2][..], 64, Activation::Tanh),
        (&[3, 20, 1][..], 1, Activation::Tanh),
        (&[6, 32, 16][..], 7, Activation::Relu),
    ];
    for (sizes, batch, act) in cases {
        let mlp = Mlp::with_activation(sizes, 3, act);
        let total = 3 + mlp.num_params() + 2;
        let mut params = vec![0.0; total];
        mlp.init_torch_default(&mut params, &mut rng);
        let x: Vec<f32> = (0..batch * sizes[0])
            .map(|_| normal(&mut rng) as f32)
            .collect();
        let g: Vec<f32> = (0..batch * sizes[sizes.len() - 1])
            .map(|_| normal(&mut rng) as f32)
            .collect();
        let junk: Vec<f32> = (0..total).map(|_| normal(&mut rng) as f32).collect();
        let mut cache = MlpCache::default();
        mlp.forward(&params, &x, batch, &mut cache);
        let mut want = junk.clone();
        want[3..3 + mlp.num_params()].fill(0.0);
        mlp.backward(&params, &mut want, &g, &mut cache);
        mlp.forward(&params, &x, batch, &mut cache);
        let mut got = junk.clone();
        mlp.backward_set(&params, &mut got, &g, &mut cache);
        let same = got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{sizes:?} x {batch}");
    }
}

proptest::proptest! {
    /// `fill_rows` leaves every whole row equal to the row and anything after the last
    /// whole row as it was, as a copy per row does.
    #[test]
    fn fill_rows_copies_the_row_into_every_whole_row(
        row in proptest::collection::vec(-10.0f32..10.0, 0..70),
        len in 0usize..2000,
    ) {
        let mut got: Vec<f32> = (0..len).map(|i| i as f32).collect();
        let mut want = got.clone();
        for r in want.chunks_exact_mut(row.len().max(1)) {
            if r.len() == row.len() {
                r.copy_from_slice(&row);
            }
        }
        fill_rows(&mut got, &row);
        proptest::prop_assert_eq!(got, want);
    }
}

proptest::proptest! {
    /// Picked rows, sliced, are the source's rows their indices name, in order, and
    /// `copy_to` lays them out one after another; dense rows are the source as it is.
    #[test]
    fn picked_rows_are_the_indexed_rows(
        dim in 1usize..7,
        n in 1usize..40,
        picks in proptest::collection::vec(0usize..1000, 0..50),
        cut in (0usize..50, 0usize..50),
    ) {
        let src: Vec<f32> = (0..n * dim).map(|i| i as f32).collect();
        let idx: Vec<usize> = picks.iter().map(|p| p % n).collect();
        let (a, b) = (cut.0.min(idx.len()), cut.1.min(idx.len()));
        let (a, b) = (a.min(b), a.max(b));
        let rows = Rows::picked(&src, dim, &idx).slice(a..b);
        proptest::prop_assert_eq!(rows.len(), b - a);
        let mut out = vec![f32::NAN; rows.len() * dim];
        rows.copy_to(&mut out);
        for (r, &i) in idx[a..b].iter().enumerate() {
            proptest::prop_assert_eq!(rows.row(r), &src[i * dim..(i + 1) * dim]);
            proptest::prop_assert_eq!(&out[r * dim..(r + 1) * dim], &src[i * dim..(i + 1) * dim]);
        }
        let dense = Rows::dense(&src, dim).slice(a.min(n)..b.min(n));
        let mut all = vec![f32::NAN; dense.len() * dim];
        dense.copy_to(&mut all);
        proptest::prop_assert_eq!(&all[..], &src[a.min(n) * dim..b.min(n) * dim]);
    }
}
