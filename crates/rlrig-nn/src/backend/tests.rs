use super::*;
use crate::nn::Activation;
use rlrig_env::Rng;
use rlrig_env::rng::Purpose;

/// Two MLPs on the same 6-wide input plus two free parameters.
fn layout() -> NetLayout {
    let a = Mlp::new(&[6, 64, 64, 3], 0);
    let c = Mlp::with_activation(&[6, 40, 1], a.end(), Activation::Relu);
    let end = c.end();
    NetLayout {
        nets: vec![a.into(), c.into()],
        free: end..end + 2,
        total: end + 2,
    }
}

/// [`layout`] with a critic as wide as the actor: work even enough for a fused pass to run
/// a network per thread on two threads (lanes), over three gradient-norm slices.
fn even_layout() -> NetLayout {
    let a = Mlp::new(&[6, 64, 64, 3], 0);
    let c = Mlp::with_activation(&[6, 64, 64, 1], a.end(), Activation::Relu);
    let end = c.end();
    NetLayout {
        nets: vec![a.into(), c.into()],
        free: end..end + 2,
        total: end + 2,
    }
}

/// Lanes only where every thread gets a network and the work is even.
#[test]
fn fused_passes_run_on_lanes_where_each_thread_gets_an_even_network() {
    for (lay, threads, want) in [
        (even_layout(), 2, Some(2)),
        (even_layout(), 1, None),
        (even_layout(), 3, None),
        (layout(), 2, None),
    ] {
        let b = Native::new(&lay, &noise(lay.total, 1), Adam::new(lay.total, 1e-8))
            .threads(threads)
            .unwrap();
        assert_eq!(b.lane_count(&[0, 1]), want, "{threads} threads");
    }
    assert!(even_layout().total > 2 * crate::optim::NORM_SLICE);
}

/// The parameters' slices tile them in order, none longer than `NORM_SLICE`, and none
/// holds parameters of two networks (or of a network and the free range).
#[test]
fn parameter_slices_tile_the_parameters_within_each_network() {
    use crate::optim::NORM_SLICE;
    for lay in [layout(), even_layout()] {
        let slices = native::param_slices(&lay);
        let mut spans: Vec<Range<usize>> = lay.nets.iter().map(|n| n.start()..n.end()).collect();
        spans.push(lay.free.clone());
        let mut at = 0;
        for s in &slices {
            assert_eq!(s.start, at, "slices {slices:?} leave a gap or overlap");
            assert!(!s.is_empty() && s.len() <= NORM_SLICE, "slice {s:?}");
            let within = spans
                .iter()
                .filter(|r| r.start <= s.start && s.end <= r.end);
            assert_eq!(within.count(), 1, "slice {s:?} crosses a span of {spans:?}");
            at = s.end;
        }
        assert_eq!(at, lay.total);
        for r in &spans {
            assert!(
                slices.iter().any(|s| s.start == r.start),
                "{r:?} starts no slice"
            );
        }
    }
}

/// Several MLPs are stored each on its own page, in the caller's order, and what goes in
/// through `new`, `set_params`, `set_optimizer` and `set_target_params` comes back out
/// unchanged in the caller's layout; a layout with one network is stored as it is.
#[test]
fn placed_networks_start_on_pages_and_come_back_unchanged() {
    use native::{PAGE_FLOATS, place};
    let lay = even_layout();
    let inner = place(&lay);
    let spans = |l: &NetLayout| -> Vec<Range<usize>> {
        let mut v: Vec<Range<usize>> = l.nets.iter().map(|n| n.start()..n.end()).collect();
        v.push(l.free.clone());
        v
    };
    let (outer_spans, inner_spans) = (spans(&lay), spans(&inner));
    for (o, i) in outer_spans.iter().zip(&inner_spans) {
        assert_eq!(o.len(), i.len(), "{o:?} placed at {i:?}");
        assert!(
            i.start.is_multiple_of(PAGE_FLOATS),
            "{i:?} is not on a page"
        );
    }
    assert!(inner_spans.windows(2).all(|w| w[0].end <= w[1].start));
    let one = NetLayout {
        nets: vec![lay.nets[0].clone()],
        free: lay.nets[0].end()..lay.nets[0].end(),
        total: lay.nets[0].end(),
    };
    assert_eq!(spans(&place(&one)), spans(&one));

    let n = lay.total;
    let mut opt = Adam::new(n, 1e-8);
    (opt.m, opt.v, opt.t) = (noise(n, 2), noise(n, 3), 7);
    let mut b = Native::new(&lay, &noise(n, 1), opt.clone());
    assert_eq!(b.params(), noise(n, 1));
    let back = b.optimizer();
    assert_eq!((back.m, back.v, back.t), (opt.m.clone(), opt.v.clone(), 7));
    b.set_params(&noise(n, 4));
    assert_eq!(b.params(), noise(n, 4));
    (opt.m, opt.v) = (noise(n, 5), noise(n, 6));
    b.set_optimizer(opt.clone());
    assert_eq!((b.optimizer().m, b.optimizer().v), (opt.m, opt.v));
    assert!(b.target_params().is_empty());
    b.init_target();
    assert_eq!(b.target_params(), noise(n, 4));
    b.set_target_params(&noise(n, 7));
    assert_eq!(b.target_params(), noise(n, 7));
    b.add_free_grad(&[1.0, -2.0]);
    let g = b.grads();
    assert_eq!(g.len(), n);
    assert_eq!(g[lay.free.clone()], [1.0, -2.0]);
    assert!(g[..lay.free.start].iter().all(|&x| x == 0.0));
}

fn noise(n: usize, stream: u64) -> Vec<f32> {
    let mut r = Rng::stream(7, Purpose::Init, stream);
    (0..n).map(|_| r.uniform(-1.0, 1.0) as f32).collect()
}

/// A few training steps on `rows`-row batches (uneven chunks for 200), with target
/// passes and input gradients: everything a learner asks of the backend.
fn train(threads: usize, rows: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    train_on_rank(threads, rows, None)
}

/// [`train`] as one rank of `ranks`.
fn train_on_rank(
    threads: usize,
    rows: usize,
    ranks: Option<crate::collective::LocalRanks>,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let lay = layout();
    let mut b = Native::new(&lay, &noise(lay.total, 1), Adam::new(lay.total, 1e-8))
        .threads(threads)
        .unwrap();
    if let Some(c) = ranks {
        b = b.collective(Arc::new(c));
    }
    b.init_target();
    let mut seen = Vec::new();
    for it in 0..4u64 {
        let x = noise(rows * 6, 10 + it);
        let mut outs = [vec![0.0; rows * 3], vec![0.0; rows]];
        let [o0, o1] = &mut outs;
        b.forward_into(Weights::Train, &[0, 1], &x, rows, &mut [o0, o1]);
        seen.extend_from_slice(b.forward_target(1, &x, rows));
        let (d0, d1) = (noise(rows * 3, 20 + it), noise(rows, 30 + it));
        b.backward_many(&[(0, &d0), (1, &d1)]);
        b.add_free_grad(&[0.5, -0.25]);
        seen.extend(b.grads());
        b.step(1e-3, 0.5);
        b.forward_train(1, &x, rows);
        seen.extend_from_slice(b.input_grad(1, &d1));
        b.soft_update(0.1);
    }
    (b.params(), b.optimizer().v, seen)
}

#[test]
fn any_thread_count_gives_the_same_bits() {
    for rows in [5, 64, 200, 1100] {
        let one = train(1, rows);
        for threads in [2, 3, 7] {
            assert!(
                one == train(threads, rows),
                "rows {rows}, {threads} threads"
            );
        }
    }
}

/// Ranks that split each backward pass's chunks (MPI data-parallel) end with the bits
/// of one process, whatever the rank and thread counts; every chunk has one owner.
#[test]
fn any_rank_count_gives_the_same_bits() {
    for rows in [5, 200, 1100] {
        let one = train(1, rows);
        for (size, threads) in [(2, 1), (3, 2)] {
            let ranks =
                crate::collective::LocalRanks::run(size, |c| train_on_rank(threads, rows, Some(c)));
            for (rank, got) in ranks.into_iter().enumerate() {
                assert!(one == got, "rows {rows}, rank {rank} of {size}");
            }
        }
    }
    for size in 1..5 {
        let ranks = crate::collective::LocalRanks::new(size);
        for c in 0..MAX_CHUNKS {
            let owners = ranks.iter().filter(|r| mine(Some(*r), c)).count();
            assert_eq!(owners, 1, "chunk {c} of {size} ranks");
        }
    }
}

/// The backward passes read weights transposed once per step (`Native::transpose`):
/// after each step and each `set_params` they give the bits of every chunk's pass on
/// the parameters as they are now, transposing in place ([`Params::flat`]).
#[test]
fn transposed_weights_follow_the_parameters() {
    let lay = layout();
    let rows = 200;
    let mut b = Native::new(&lay, &noise(lay.total, 1), Adam::new(lay.total, 1e-8))
        .threads(2)
        .unwrap();
    let k = chunk_count(rows, lay.min_chunk_rows(true));
    assert!(k > 1, "the test needs a chunked pass");
    let Net::Mlp(net) = &lay.nets[0] else {
        unreachable!("an MLP")
    };
    for it in 0..4u64 {
        if it == 2 {
            b.set_params(&noise(lay.total, 50));
        }
        let x = noise(rows * 6, 40 + it);
        let d = noise(rows * 3, 60 + it);
        b.forward_train(0, &x, rows);
        b.backward(0, &d);
        let got_grads = b.grads();
        b.forward_train(0, &x, rows);
        let got_dx = b.input_grad(0, &d).to_vec();
        // Each chunk on the parameters now, weights transposed by each product.
        let p = b.params();
        let mut grads = vec![0.0f32; lay.total];
        let mut dx = vec![0.0f32; rows * 6];
        for c in 0..k {
            let r = chunk_rows(rows, k, c);
            let mut cache = MlpCache::default();
            net.forward(&p, &x[r.start * 6..r.end * 6], r.len(), &mut cache);
            let mut g = vec![0.0f32; lay.total];
            let dr = &d[r.start * 3..r.end * 3];
            net.backward_set(&p, &mut g, dr, &mut cache);
            grads.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
            let dxr = &mut dx[r.start * 6..r.end * 6];
            net.backward_full(&p, None, dr, &mut cache, Some(dxr));
        }
        assert!(got_grads == grads, "step {it}: parameter gradients");
        assert!(got_dx == dx, "step {it}: input gradients");
        b.step(1e-2, f64::INFINITY);
    }
}

#[test]
fn chunked_gradients_equal_one_pass_within_rounding() {
    // The sum over chunks is the same gradient as one pass over all rows.
    let lay = layout();
    let p = noise(lay.total, 3);
    let rows = 333;
    assert!(chunk_count(rows, lay.min_chunk_rows(true)) > 1);
    let x = noise(rows * 6, 4);
    let (d0, d1) = (noise(rows * 3, 5), noise(rows, 6));
    let mut b = Native::new(&lay, &p, Adam::new(lay.total, 1e-8))
        .threads(2)
        .unwrap();
    b.forward_train(0, &x, rows);
    b.forward_train(1, &x, rows);
    b.backward_many(&[(0, &d0), (1, &d1)]);
    let chunked = b.grads();
    let mut whole = vec![0.0f32; lay.total];
    for (i, d) in [(0, &d0), (1, &d1)] {
        let mut cache = NetCache::default();
        lay.nets[i].forward(&p, &x, rows, &mut cache);
        lay.nets[i].backward(&p, &mut whole, d, &mut cache);
    }
    let scale = whole.iter().fold(0.0f32, |m, g| m.max(g.abs()));
    for (j, (a, b)) in chunked.iter().zip(&whole).enumerate() {
        assert!((a - b).abs() <= 1e-5 * scale, "parameter {j}: {a} vs {b}");
    }
}

#[test]
fn chunks_cover_the_rows_in_order() {
    for min_rows in [MIN_CHUNK_ROWS_LARGE, 17, MIN_CHUNK_ROWS] {
        for rows in 0..2000 {
            let k = chunk_count(rows, min_rows);
            assert!((1..=MAX_CHUNKS).contains(&k));
            let mut at = 0;
            for c in 0..k {
                let r = chunk_rows(rows, k, c);
                assert_eq!(r.start, at);
                assert!(rows < min_rows || r.len() >= min_rows);
                at = r.end;
            }
            assert_eq!(at, rows);
        }
    }
}

/// A fused pass (forward, the caller's loss per chunk, backward in one job) over rows
/// picked from a larger source gives the bits of the three passes apart over those rows
/// gathered, on any thread count (a network per thread included), and fuses only where
/// its chunks hold whole loss blocks.
#[test]
fn fused_pass_gives_the_separate_passes_bits() {
    for lay in [layout(), even_layout()] {
        // d loss / d output of row `r`: the output halved plus that row's noise.
        let loss_of = |r: usize, out: &[f32], width: usize, noise: &[f32], d: &mut [f32]| {
            for (j, (d, o)) in d.iter_mut().zip(out).enumerate() {
                *d = 0.5 * o + noise[r * width + j];
            }
        };
        for (rows, block, fuses) in [
            (64, 64, false),
            (128, 64, true),
            (128, 48, false),
            (256, 32, true),
            (1024, 64, true),
            (1100, 64, false),
        ] {
            // Every other row of the source, last first (a minibatch of a rollout).
            let src = noise(2 * rows * 6, 40);
            let idx: Vec<usize> = (0..rows).map(|r| 2 * (rows - 1 - r) + r % 2).collect();
            let x: Vec<f32> = idx
                .iter()
                .flat_map(|&i| &src[i * 6..i * 6 + 6])
                .copied()
                .collect();
            let (n0, n1) = (noise(rows * 3, 41), noise(rows, 42));
            let run = |threads: usize, fused: bool| {
                let mut b = Native::new(&lay, &noise(lay.total, 1), Adam::new(lay.total, 1e-8))
                    .threads(threads)
                    .unwrap();
                let mut seen = Vec::new();
                for _ in 0..2 {
                    let did = fused
                        && b.train_fused(
                            &[0, 1],
                            Rows::picked(&src, 6, &idx),
                            block,
                            &|r, net, o, d| {
                                let (w, n) = if net == 0 { (3, &n0) } else { (1, &n1) };
                                for (j, row) in r.enumerate() {
                                    loss_of(
                                        row,
                                        &o[j * w..(j + 1) * w],
                                        w,
                                        n,
                                        &mut d[j * w..(j + 1) * w],
                                    );
                                }
                            },
                        );
                    assert_eq!(did, fused && fuses, "rows {rows}, block {block}");
                    if !did {
                        let mut outs = [vec![0.0; rows * 3], vec![0.0; rows]];
                        let [o0, o1] = &mut outs;
                        b.forward_into(Weights::Train, &[0, 1], &x, rows, &mut [o0, o1]);
                        let (mut d0, mut d1) = (vec![0.0; rows * 3], vec![0.0; rows]);
                        for r in 0..rows {
                            loss_of(r, &o0[r * 3..r * 3 + 3], 3, &n0, &mut d0[r * 3..r * 3 + 3]);
                            loss_of(r, &o1[r..r + 1], 1, &n1, &mut d1[r..r + 1]);
                        }
                        b.backward_many(&[(0, &d0), (1, &d1)]);
                    }
                    seen.extend(b.grads());
                    b.step(1e-3, 0.5);
                }
                (b.params(), seen)
            };
            let apart = run(1, false);
            for threads in [1, 2, 3] {
                assert!(
                    apart == run(threads, true),
                    "rows {rows}, {threads} threads, {} parameters",
                    lay.total
                );
            }
        }
    }
}

/// An unclipped step (`max_grad_norm` infinite) runs its slices' gradient sums, norms and
/// updates in one pass: the same parameters, moments and norm as the two passes of a
/// clip that never acts, on any thread count.
#[test]
fn an_unclipped_step_gives_the_bits_of_a_clip_that_never_acts() {
    let lay = layout();
    let run = |threads: usize, max_norm: f64| {
        let mut b = Native::new(&lay, &noise(lay.total, 1), Adam::new(lay.total, 1e-8))
            .threads(threads)
            .unwrap();
        let mut norms = Vec::new();
        for it in 0..3u64 {
            let rows = 200;
            let x = noise(rows * 6, 40 + it);
            let mut outs = [vec![0.0; rows * 3], vec![0.0; rows]];
            let [o0, o1] = &mut outs;
            b.forward_into(Weights::Train, &[0, 1], &x, rows, &mut [o0, o1]);
            let (d0, d1) = (noise(rows * 3, 50 + it), noise(rows, 60 + it));
            b.backward_many(&[(0, &d0), (1, &d1)]);
            b.add_free_grad(&[0.5, -0.25]);
            norms.push(b.step(1e-3, max_norm).to_bits());
        }
        (b.params(), b.optimizer().m, b.optimizer().v, norms)
    };
    let two_passes = run(1, 1e30);
    for threads in [1, 2, 3] {
        assert!(
            run(threads, f64::INFINITY) == two_passes,
            "{threads} threads"
        );
    }
}

/// Two critics' input gradients summed in one pass ([`NetBackend::input_grad_sum`]):
/// the bits of taking them one at a time and adding them in order, whether the passes
/// are split in chunks (200 rows) or not (5), on any thread count.
#[test]
fn summed_input_gradients_equal_the_one_at_a_time_sum() {
    let q1 = Mlp::with_activation(&[6, 64, 64, 1], 0, Activation::Relu);
    let q2 = Mlp::with_activation(&[6, 64, 64, 1], q1.end(), Activation::Relu);
    let total = q2.end();
    let lay = NetLayout {
        nets: vec![q1.into(), q2.into()],
        free: total..total,
        total,
    };
    for rows in [5, 200] {
        let x = noise(rows * 6, 70);
        let (d1, d2) = (noise(rows, 71), noise(rows, 72));
        let run = |threads: usize, summed: bool| {
            let mut b = Native::new(&lay, &noise(total, 2), Adam::new(total, 1e-8))
                .threads(threads)
                .unwrap();
            let mut q = [vec![0.0; rows], vec![0.0; rows]];
            let [a, c] = &mut q;
            b.forward_into(Weights::Train, &[0, 1], &x, rows, &mut [a, c]);
            let mut out = vec![f32::NAN; rows * 6];
            if summed {
                b.input_grad_sum(&[(0, &d1), (1, &d2)], &mut out);
            } else {
                out.copy_from_slice(b.input_grad(0, &d1));
                let second = b.input_grad(1, &d2);
                out.iter_mut().zip(second).for_each(|(o, v)| *o += v);
            }
            out.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
        };
        let want = run(1, false);
        for threads in [1, 2, 3] {
            assert!(run(threads, true) == want, "rows {rows}, {threads} threads");
        }
    }
}
