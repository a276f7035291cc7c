//! [`Native`], the default backend: the fused path of [`crate::nn`] and [`crate::conv`] over
//! a host parameter vector, data-parallel over fixed chunks of rows (so the thread count
//! never changes a bit), with the chunks shared out over MPI ranks when asked.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{BackendMaker, ChunkLoss, Net, NetBackend, NetCache, NetLayout, OptimState, Weights};
use crate::NnError;
use crate::collective::Collective;
use crate::nn::{Mlp, Params, Rows};
use crate::optim::{Adam, NORM_SLICE, clip_factor, sum_squares};
use rlrig_env::pool::Pool;

/// Rows of a training pass are split into this many chunks: `rows / min_rows`, at
/// least 1 and at most [`MAX_CHUNKS`], where `min_rows` is the layout's
/// [`NetLayout::min_chunk_rows`]. The count depends on the rows and the networks only,
/// never on the thread count, and chunk gradients are summed in chunk order, so any
/// `--threads` gives the same bits (see [`Native`]).
pub const MIN_CHUNK_ROWS: usize = 64;
/// The most rows an inference chunk needs to hold (a small network's): its rows do not
/// depend on each other, so the split never changes the outputs, and 64 envs' rollout
/// step runs on both cores in two chunks.
pub const MIN_INFER_CHUNK_ROWS: usize = 32;
/// The fewest rows a chunk holds however large the network.
pub const MIN_CHUNK_ROWS_LARGE: usize = 4;
/// A chunk of an inference pass holds at least this much forward work (2 x
/// multiply-adds), within [`MIN_CHUNK_ROWS_LARGE`]..=[`MIN_CHUNK_ROWS`] rows: networks
/// under 2 MFLOP per row (MLPs, MinAtar's CNN) keep 64 rows a chunk, the Atari CNN
/// (18.7 MFLOP) 8: every chunk reads its 6.4 MB 512-unit layer once, so A2C's 16 envs
/// take 2 chunks (measured on 2 cores: 7 % less inference time than 4 chunks).
pub const MIN_CHUNK_FLOPS: f64 = 150e6;
/// The same for a training pass, whose chunks each also zero and add a whole gradient
/// (the Atari CNN's 1.7 M floats): its training chunks take 34 rows, so A2C's 80-row
/// update is 2 chunks and PPO's 256-row minibatch 7 (measured on 2 cores: 0.82x the
/// update time of 13-row chunks).
pub const MIN_TRAIN_CHUNK_FLOPS: f64 = 640e6;
/// The most chunks a pass is split into: enough for 16 cores.
pub const MAX_CHUNKS: usize = 16;
/// A fused pass runs its networks on lanes ([`Native::lane_count`]) only where the
/// lanes' work is this even: the slowest lane's forward multiply-adds at most this many
/// times the fastest's.
const MAX_LANE_IMBALANCE: f64 = 1.25;

/// Chunks of a pass over `rows` rows, chunks of at least `min_rows` rows.
pub fn chunk_count(rows: usize, min_rows: usize) -> usize {
    (rows / min_rows).clamp(1, MAX_CHUNKS)
}

/// Rows of chunk `c` of `k` over `rows` rows: the first `rows % k` chunks take one more.
pub fn chunk_rows(rows: usize, k: usize, c: usize) -> std::ops::Range<usize> {
    let (base, extra) = (rows / k, rows % k);
    let start = c * base + c.min(extra);
    start..start + base + usize::from(c < extra)
}

/// Which activations of a chunk a pass keeps: a training pass's (for the backward pass
/// after it), an inference pass's, or a target-parameter pass's. Apart, so that passes of
/// different sizes that alternate (a rollout's inference, the update's minibatches) each
/// keep their buffers instead of resizing (and zero-filling) them on every switch.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(usize)]
enum Use {
    Train,
    Infer,
    Target,
}

/// One chunk's working memory: activations of each network and its gradient.
#[derive(Clone, Default)]
struct Chunk {
    /// Each network's caches, per [`Use`].
    caches: [Vec<NetCache>; 3],
    /// Each network's output of this chunk's last pass.
    outs: Vec<Vec<f32>>,
    /// A fused pass's d loss / d output, per network of the pass (in its order).
    douts: Vec<Vec<f32>>,
    /// The input gradient of a second network, before it is added to the first's
    /// ([`NetBackend::input_grad_sum`]).
    dx: Vec<f32>,
    grads: Paged,
}

/// The native CPU path: [`crate::nn::Mlp`] and [`crate::conv::ConvNet`] over a host
/// parameter vector, [`Adam`] in place.
///
/// Data-parallel and deterministic: a pass over `rows` rows is split into
/// [`chunk_count`]`(rows)` chunks of rows that the worker pool runs at once; each chunk
/// keeps its own activations and computes its own gradient, and the chunk gradients are
/// added to the accumulator in chunk order. How many threads run the chunks changes
/// nothing in the result.
pub struct Native {
    /// The networks as Native stores them ([`place`]): each MLP's range on a page of
    /// its own where there are several.
    layout: NetLayout,
    /// The networks as the caller sees them: the flat vector of `params()`,
    /// `optimizer()` and checkpoints.
    outer: NetLayout,
    params: Paged,
    grads: Paged,
    /// The optimiser's kind, hyperparameters and step count; its moments are `m` and `v`
    /// (in `layout`'s places).
    opt: Adam,
    m: Paged,
    v: Paged,
    target: Paged,
    chunks: Vec<Chunk>,
    /// Rows, chunks and caches of each network's last pass (its backward pass splits
    /// them the same way and reads those caches).
    pass_rows: Vec<Option<(usize, usize, Use)>>,
    /// Each network's output of its last pass, `rows x out`.
    outs: Vec<Vec<f32>>,
    target_outs: Vec<Vec<f32>>,
    dinput: Vec<f32>,
    /// Networks whose chunk gradients wait to be added to `grads` (by the next `step`):
    /// their parameter range and chunk count.
    pending: Vec<(Range<usize>, usize)>,
    /// The parameters' slices ([`param_slices`]): the unit of the gradient sums, the
    /// norm and the optimiser step.
    slices: Vec<Range<usize>>,
    /// Squared gradient norm of each slice (f64 bits), summed in order: written by the
    /// lane that steps the slice, read by every lane ([`Native::step`]).
    sumsq: Vec<AtomicU64>,
    pool: Option<Arc<Pool>>,
    /// [`NetLayout::min_chunk_rows`] of the layout: inference, training passes.
    min_rows: (usize, usize),
    /// The ranks that share the backward passes' chunks (see [`Native::collective`]).
    collective: Option<Arc<dyn Collective>>,
    /// The gathers' buffers (allocated by the first).
    bufs: Bufs,
    /// The weights the backward passes read transposed ([`Params::transposed`]), at the
    /// parameters' indices, and whether each network's are those of the parameters now:
    /// each weight is transposed once per optimiser step, not once per chunk and pass
    /// (SAC 400-300 at batch 256: 20 transposes of a 400x300 weight an update, now 5).
    transposed: Paged,
    transposed_fresh: Vec<bool>,
    /// Each MLP network rebased to its own parameter range ([`Mlp::rebased`]): how a
    /// lane runs it on `&params[start..end]` (and on its range of `transposed`, which a
    /// lane brings up to date on its own core).
    rebased: Vec<Option<Mlp>>,
    /// The last pass on lanes' plan: its networks, and the lane of each slice of the
    /// parameters (its network's lane), so the step adds, clips
    /// and updates each slice on the core that computed it. Made once per set of
    /// networks, not per pass.
    lane_plan: Option<LanePlan>,
    /// Whether the next step follows `lane_plan` (a pass on lanes came before it).
    lanes_pending: bool,
}

/// Floats in a page: the unit [`place`] aligns each network's range to.
pub(super) const PAGE_FLOATS: usize = 1024;

/// A float vector whose element 0 sits on a page boundary (4 KB), so that the ranges
/// [`place`] lays out on page multiples never share a cache line, nor the page a
/// hardware prefetcher streams through, with another network's.
#[derive(Default)]
struct Paged {
    buf: Vec<f32>,
    at: usize,
    len: usize,
}

impl Paged {
    fn zeros(len: usize) -> Paged {
        let buf = vec![0.0f32; len + PAGE_FLOATS];
        let bytes = PAGE_FLOATS * size_of::<f32>();
        // An `f32` allocation is 4-byte aligned, so the distance is whole floats.
        let at = (bytes - buf.as_ptr() as usize % bytes) % bytes / size_of::<f32>();
        Paged { buf, at, len }
    }
}

/// `p` made `len` long where it is empty (a buffer made by the first pass that needs it:
/// the transposed weights).
fn ensure_len(p: &mut Paged, len: usize) {
    if p.is_empty() {
        *p = Paged::zeros(len);
    }
}

impl Clone for Paged {
    /// A copy on its own page boundary (the buffer's own alignment moves with it).
    fn clone(&self) -> Paged {
        let mut p = Paged::zeros(self.len);
        p.copy_from_slice(self);
        p
    }
}

impl std::ops::Deref for Paged {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf[self.at..self.at + self.len]
    }
}

impl std::ops::DerefMut for Paged {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[self.at..self.at + self.len]
    }
}

/// Where [`Native`] keeps `layout`'s parameters: where there are several networks and
/// all are MLPs (the ones lanes run), each network's range, then the free range, starts
/// on a page of its own ([`PAGE_FLOATS`]), in the caller's order; else the caller's
/// layout. Measured on a 2-core Zen 4 VM (2026-12-07): PPO CartPole's critic ended and
/// its actor began inside one cache line of the parameters, the gradients, both moments,
/// the transposed weights and every chunk's gradients, which both lanes wrote every
/// minibatch; the caller's Adam on the actor took 3.5 us in one spell of the host and
/// 7.0 us when lines crossed its cores slowly. The padding is never read by a network:
/// it stays zero, with zero gradients and moments, and the slices leave it out.
pub(super) fn place(layout: &NetLayout) -> NetLayout {
    let mlps: Option<Vec<&Mlp>> = layout
        .nets
        .iter()
        .map(|n| match n {
            Net::Mlp(m) => Some(m),
            Net::Conv(_) => None,
        })
        .collect();
    let Some(mlps) = mlps.filter(|m| m.len() > 1) else {
        return layout.clone();
    };
    let mut order: Vec<usize> = (0..mlps.len()).collect();
    order.sort_by_key(|&i| layout.nets[i].start());
    let mut nets: Vec<Option<Net>> = vec![None; mlps.len()];
    let mut at = 0;
    for i in order {
        nets[i] = Some(Net::Mlp(mlps[i].rebased(at)));
        at = (at + mlps[i].num_params()).next_multiple_of(PAGE_FLOATS);
    }
    let free = at..at + layout.free.len();
    NetLayout {
        nets: nets
            .into_iter()
            .map(|n| n.expect("every network placed"))
            .collect(),
        total: free.end,
        free,
    }
}

/// Copies each network's (and the free) range of `src`, laid out as `from`, to the same
/// network's range of `dst`, laid out as `to` (the padding of `dst` is left as it is).
fn relayout(from: &NetLayout, src: &[f32], to: &NetLayout, dst: &mut [f32]) {
    for (a, b) in from.nets.iter().zip(&to.nets) {
        dst[b.start()..b.end()].copy_from_slice(&src[a.start()..a.end()]);
    }
    dst[to.free.clone()].copy_from_slice(&src[from.free.clone()]);
}

/// See [`Native::lane_plan`].
struct LanePlan {
    nets: Vec<usize>,
    slice_lane: Vec<usize>,
}

impl LanePlan {
    /// Networks `nets[j]` (parameter ranges `ranges[j]`) on lane `j % lanes`, over
    /// the parameters' `slices` ([`param_slices`]: each inside one range): a slice goes
    /// to its network's lane, the others (free parameters, networks outside the pass) to
    /// lane 0, the caller.
    fn new(
        nets: &[usize],
        ranges: &[Range<usize>],
        lanes: usize,
        slices: &[Range<usize>],
    ) -> LanePlan {
        let slice_lane = slices
            .iter()
            .map(|slice| {
                ranges
                    .iter()
                    .position(|r| r.contains(&slice.start))
                    .map_or(0, |j| j % lanes)
            })
            .collect();
        LanePlan {
            nets: nets.to_vec(),
            slice_lane,
        }
    }
}

/// The parameters' slices: each network's range (and the free range) cut into pieces of
/// [`NORM_SLICE`] from its start, in parameter order. Fixed by the layout, so the norm
/// (summed per slice, then over slices in order) and every parameter come out the same
/// on any number of threads; and no slice holds two networks, so after a pass on lanes
/// every slice is added, clipped and updated on the core that computed its gradients
/// (a slice across two networks' ranges moved ~200 cache lines between cores a PPO
/// CartPole minibatch).
pub(super) fn param_slices(layout: &NetLayout) -> Vec<Range<usize>> {
    let mut spans: Vec<Range<usize>> = layout.nets.iter().map(|n| n.start()..n.end()).collect();
    spans.push(layout.free.clone());
    spans.sort_by_key(|r| r.start);
    spans
        .into_iter()
        .flat_map(|r| {
            r.clone()
                .step_by(NORM_SLICE)
                .map(move |a| a..(a + NORM_SLICE).min(r.end))
        })
        .collect()
}

/// `v` cut at `slices` (in order and apart, as [`param_slices`] are; what lies between
/// them, [`place`]'s padding, is left out), without allocating: the step's per-slice
/// views of the parameters, gradients and moments.
fn tiles_mut<'a>(
    v: &'a mut [f32],
    slices: &'a [Range<usize>],
) -> impl Iterator<Item = &'a mut [f32]> {
    let (mut rest, mut at) = (v, 0);
    slices.iter().map(move |s| {
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(s.start - at);
        let (tile, tail) = tail.split_at_mut(s.len());
        (rest, at) = (tail, s.end);
        tile
    })
}

/// A gather's send and receive buffers, kept across passes by [`Native`].
#[derive(Default)]
struct Bufs {
    send: Vec<f32>,
    recv: Vec<f32>,
}

impl Bufs {
    /// All-gathers `send` (filled by the caller) into `recv`.
    fn exchange(&mut self, c: &dyn Collective) -> &[f32] {
        self.recv.resize(self.send.len() * c.size(), 0.0);
        c.allgather_f32_into(&self.send, &mut self.recv);
        &self.recv
    }
}

/// The parameters as the backward passes read them: `params`, and the weights
/// [`Native::transpose`] brought up to date for their networks (none before the first).
fn weights<'a>(params: &'a [f32], transposed: &'a [f32]) -> Params<'a> {
    Params {
        flat: params,
        transposed: (!transposed.is_empty()).then_some(transposed),
    }
}

/// Whether chunk `c` is this rank's to compute: chunks go round-robin over the ranks.
pub(super) fn mine(collective: Option<&dyn Collective>, c: usize) -> bool {
    collective.is_none_or(|r| c % r.size() == r.rank())
}

/// Gives every rank the pending chunk gradients the others computed: each rank sends
/// its own chunks' gradients (over each pending range, in order), and copies the
/// others' into their chunks. One collective call; ranks with fewer chunks pad.
fn gather_pending(
    c: &dyn Collective,
    pending: &[(Range<usize>, usize)],
    chunks: &mut [Chunk],
    bufs: &mut Bufs,
) {
    let (rank, size) = (c.rank(), c.size());
    if size < 2 || pending.is_empty() {
        return;
    }
    let slots = |k: usize| k.div_ceil(size);
    let per_rank: usize = pending.iter().map(|(r, k)| slots(*k) * r.len()).sum();
    let local = &mut bufs.send;
    local.clear();
    for (r, k) in pending {
        for j in 0..slots(*k) {
            match chunks.get(rank + j * size).filter(|_| rank + j * size < *k) {
                Some(chunk) => local.extend_from_slice(&chunk.grads[r.clone()]),
                None => local.resize(local.len() + r.len(), 0.0),
            }
        }
    }
    let all = bufs.exchange(c);
    for (q, theirs) in all.chunks_exact(per_rank).enumerate() {
        if q == rank {
            continue;
        }
        let mut at = 0;
        for (r, k) in pending {
            for j in 0..slots(*k) {
                let ch = q + j * size;
                if ch < *k {
                    chunks[ch].grads[r.clone()].copy_from_slice(&theirs[at..at + r.len()]);
                }
                at += r.len();
            }
        }
    }
}

/// Adds the pending chunk gradients that fall in `g` (the parameters from `at`).
fn add_pending(g: &mut [f32], at: usize, pending: &[(Range<usize>, usize)], chunks: &[Chunk]) {
    let end = at + g.len();
    for (r, k) in pending {
        let (a, b) = (r.start.max(at), r.end.min(end));
        if a >= b {
            continue;
        }
        let dst = &mut g[a - at..b - at];
        for chunk in &chunks[..*k] {
            for (x, y) in dst.iter_mut().zip(&chunk.grads[a..b]) {
                *x += y;
            }
        }
    }
}

/// Each chunk of a pass over `rows` rows paired with its rows of `out` (`width` floats
/// a row): the work of a pass that writes one output row per input row.
fn rows_of_chunks<'a>(
    chunks: &'a mut [Chunk],
    out: &'a mut [f32],
    rows: usize,
    width: usize,
) -> Vec<(&'a mut Chunk, &'a mut [f32])> {
    let k = chunks.len();
    let mut work = Vec::with_capacity(k);
    let mut rest = out;
    for (c, chunk) in chunks.iter_mut().enumerate() {
        let (head, tail) = rest.split_at_mut(chunk_rows(rows, k, c).len() * width);
        work.push((chunk, head));
        rest = tail;
    }
    work
}

/// `v`'s elements in each of `ranges` (disjoint), in the ranges' order.
fn disjoint_mut<'a>(v: &'a mut [f32], ranges: &[Range<usize>]) -> Vec<&'a mut [f32]> {
    let mut order: Vec<usize> = (0..ranges.len()).collect();
    order.sort_unstable_by_key(|&i| ranges[i].start);
    let mut parts: Vec<Option<&'a mut [f32]>> = (0..ranges.len()).map(|_| None).collect();
    let (mut rest, mut at) = (v, 0);
    for i in order {
        let r = &ranges[i];
        let (mine, tail) = std::mem::take(&mut rest)[r.start - at..].split_at_mut(r.len());
        parts[i] = Some(mine);
        (rest, at) = (tail, r.end);
    }
    parts
        .into_iter()
        .map(|p| p.expect("every range taken once"))
        .collect()
}

/// Runs `f(s, &mut work[s])` for every slice of the parameters: slice `s` on lane
/// `owner[s]` after a pass on lanes (where that lane's network's gradients are), else as
/// [`for_each`]. Slices are fixed, so the result is the same either way.
fn for_each_slice<T: Send>(
    pool: Option<&Pool>,
    owner: Option<&[usize]>,
    work: &mut [T],
    f: impl Fn(usize, &mut T) + Sync,
) {
    let (Some(p), Some(owner)) = (pool, owner) else {
        return for_each(pool, work, f);
    };
    p.lanes_mut(&mut by_lane(p, owner, work), |_, slices| {
        for (s, w) in slices.iter_mut() {
            f(*s, w);
        }
    });
}

/// A step's views of one slice: parameters, gradients, Adam's two moments.
type Tiles<'a> = (&'a mut [f32], &'a mut [f32], &'a mut [f32], &'a mut [f32]);

/// `work` (one item per slice) dealt to the pool's lanes: slice `s` to lane `owner[s]`,
/// with its index.
fn by_lane<'a, T>(p: &Pool, owner: &[usize], work: &'a mut [T]) -> Vec<Vec<(usize, &'a mut T)>> {
    let mut lanes: Vec<Vec<(usize, &mut T)>> = (0..p.threads()).map(|_| Vec::new()).collect();
    for (s, w) in work.iter_mut().enumerate() {
        lanes[owner[s]].push((s, w));
    }
    lanes
}

/// Runs `f(c, &mut items[c])` for every item: on the pool when there is one (what the
/// native backend and PPO's loss blocks run their chunks with).
pub fn for_each<T: Send>(pool: Option<&Pool>, items: &mut [T], f: impl Fn(usize, &mut T) + Sync) {
    match pool {
        Some(p) => p.for_each_mut(items, f),
        None => items.iter_mut().enumerate().for_each(|(c, t)| f(c, t)),
    }
}

/// The forward passes of networks `ids` over `rows` rows of `x`, split in chunks (one
/// pool job for all of them); each chunk's activations stay in its caches for `use_`,
/// the outputs are gathered into `outs[id]`.
#[allow(clippy::too_many_arguments)]
fn chunked_forward(
    pool: Option<&Pool>,
    ranks: Option<&dyn Collective>,
    bufs: &mut Bufs,
    chunks: &mut [Chunk],
    use_: Use,
    ids: &[usize],
    nets: &[Net],
    params: &[f32],
    x: &[f32],
    rows: usize,
    k: usize,
    outs: &mut [Vec<f32>],
) {
    for &i in ids {
        assert_eq!(x.len(), rows * nets[i].input_dim(), "forward: input shape");
        outs[i].resize(rows * nets[i].output_dim(), 0.0);
    }
    if k == 1 {
        let chunk = &mut chunks[0];
        for &i in ids {
            let c = &mut chunk.caches[use_ as usize][i];
            outs[i].copy_from_slice(nets[i].forward(params, x, rows, c));
        }
        return;
    }
    for_each(pool, &mut chunks[..k], |c, chunk| {
        if !mine(ranks, c) {
            return; // another rank's: its rows come with the gather below
        }
        let r = chunk_rows(rows, k, c);
        for &i in ids {
            let din = nets[i].input_dim();
            let xs = &x[r.start * din..r.end * din];
            let c = &mut chunk.caches[use_ as usize][i];
            let y = nets[i].forward(params, xs, r.len(), c);
            chunk.outs[i].clear();
            chunk.outs[i].extend_from_slice(y);
        }
    });
    let widths: Vec<usize> = ids.iter().map(|&i| nets[i].output_dim()).collect();
    for (&i, &od) in ids.iter().zip(&widths) {
        for (c, chunk) in chunks[..k].iter().enumerate() {
            if mine(ranks, c) {
                let r = chunk_rows(rows, k, c);
                outs[i][r.start * od..r.end * od].copy_from_slice(&chunk.outs[i]);
            }
        }
    }
    if let Some(c) = ranks {
        // The outputs of `ids`, in network order (each taken once).
        let mut dst: Vec<(usize, &mut Vec<f32>)> = outs
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| ids.contains(i))
            .collect();
        let od: Vec<usize> = dst.iter().map(|(i, _)| nets[*i].output_dim()).collect();
        let locals: Vec<Vec<&[f32]>> = (0..k)
            .map(|ch| {
                dst.iter()
                    .map(|(i, _)| chunks[ch].outs[*i].as_slice())
                    .collect()
            })
            .collect();
        let mut dst: Vec<&mut Vec<f32>> = dst.iter_mut().map(|(_, o)| &mut **o).collect();
        gather_rows(c, rows, k, &od, &locals, &mut dst, bufs);
    }
}

/// Gives every rank the rows of every chunk of a pass split over the ranks: `locals[c]`
/// holds chunk `c`'s rows of each output (`widths[j]` floats a row; this rank's chunks
/// only are read), and the other ranks' chunks are written into `outs[j]`
/// (`rows x widths[j]`). One collective call.
fn gather_rows(
    c: &dyn Collective,
    rows: usize,
    k: usize,
    widths: &[usize],
    locals: &[Vec<&[f32]>],
    outs: &mut [&mut Vec<f32>],
    bufs: &mut Bufs,
) {
    let (rank, size) = (c.rank(), c.size());
    if size < 2 || k < 2 {
        return;
    }
    let slots = k.div_ceil(size);
    let most = chunk_rows(rows, k, 0).len();
    let per_slot: usize = widths.iter().map(|w| most * w).sum();
    let local = &mut bufs.send;
    local.resize(slots * per_slot, 0.0);
    for j in 0..slots {
        let ch = rank + j * size;
        if ch >= k {
            break;
        }
        let mut at = j * per_slot;
        for (o, w) in widths.iter().enumerate() {
            let v = locals[ch][o];
            local[at..at + v.len()].copy_from_slice(v);
            at += most * w;
        }
    }
    let all = bufs.exchange(c);
    for q in (0..size).filter(|&q| q != rank) {
        for j in 0..slots {
            let ch = q + j * size;
            if ch >= k {
                break;
            }
            let r = chunk_rows(rows, k, ch);
            let mut at = (q * slots + j) * per_slot;
            for (o, w) in widths.iter().enumerate() {
                outs[o][r.start * w..r.end * w].copy_from_slice(&all[at..at + r.len() * w]);
                at += most * w;
            }
        }
    }
}

impl Native {
    pub fn new(layout: &NetLayout, params: &[f32], opt: Adam) -> Native {
        assert_eq!(params.len(), layout.total, "Native::new: parameter count");
        assert_eq!(opt.m.len(), layout.total, "Native::new: optimiser size");
        let nets = layout.nets.len();
        let inner = place(layout);
        let placed = |v: &[f32]| {
            let mut p = Paged::zeros(inner.total);
            relayout(layout, v, &inner, &mut p);
            p
        };
        let (params, m, v) = (placed(params), placed(&opt.m), placed(&opt.v));
        Native {
            slices: param_slices(&inner),
            min_rows: (inner.min_chunk_rows(false), inner.min_chunk_rows(true)),
            rebased: inner
                .nets
                .iter()
                .map(|n| match n {
                    Net::Mlp(m) => Some(m.rebased(0)),
                    Net::Conv(_) => None,
                })
                .collect(),
            grads: Paged::zeros(inner.total),
            layout: inner,
            outer: layout.clone(),
            params,
            opt: Adam {
                m: Vec::new(),
                v: Vec::new(),
                ..opt
            },
            m,
            v,
            target: Paged::default(),
            chunks: Vec::new(),
            pass_rows: vec![None; nets],
            outs: vec![Vec::new(); nets],
            target_outs: vec![Vec::new(); nets],
            dinput: Vec::new(),
            pending: Vec::new(),
            sumsq: Vec::new(),
            pool: None,
            collective: None,
            bufs: Bufs::default(),
            transposed: Paged::default(),
            transposed_fresh: vec![false; nets],
            lane_plan: None,
            lanes_pending: false,
        }
    }

    /// How many lanes a fused pass of `nets` runs on, network `nets[j]` on lane
    /// `j % lanes` with all its chunks: every thread of the pool, where each thread gets
    /// a network (at least as many networks as threads), all are MLPs and the lanes'
    /// work is even. None: the chunks go over the threads instead (data-parallel).
    ///
    /// Why: a chunk of rows needs every network's weights, and its gradient goes to the
    /// thread that adds it up; across cores whose cache lines take ~0.3 us to cross
    /// (measured on a 2-core Zen 4 VM, 2026-12-07), PPO CartPole's 128-row minibatches
    /// ran slower on two threads than on one. A network per core keeps its weights,
    /// transposes, gradients and Adam moments in that core's cache.
    pub(super) fn lane_count(&self, nets: &[usize]) -> Option<usize> {
        let lanes = self.pool.as_deref().map_or(1, Pool::threads);
        if lanes < 2 || lanes > nets.len() || nets.iter().any(|&n| self.rebased[n].is_none()) {
            return None;
        }
        let mut work = vec![0.0; lanes];
        for (j, &n) in nets.iter().enumerate() {
            work[j % lanes] += self.layout.nets[n].flops_per_row();
        }
        let (lo, hi) = work.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &w| {
            (lo.min(w), hi.max(w))
        });
        (hi <= lo * MAX_LANE_IMBALANCE).then_some(lanes)
    }

    /// The fused pass of [`NetBackend::train_fused`] on `lanes` lanes: network `nets[j]`,
    /// every chunk of it in chunk order, on lane `j % lanes` (its weights transposed
    /// there too). Each chunk's forward pass, loss and backward pass are the data-parallel
    /// path's, into the same chunk gradients: the same bits.
    #[allow(clippy::too_many_arguments)]
    fn train_lanes(
        &mut self,
        lanes: usize,
        nets: &[usize],
        ranges: &[Range<usize>],
        x: Rows<'_>,
        k: usize,
        loss: &ChunkLoss<'_>,
    ) {
        let rows = x.len();
        // Each network's share of every chunk: its caches, d loss / d output, gradient.
        type Share<'a> = (&'a mut NetCache, &'a mut Vec<f32>, &'a mut [f32]);
        let mut shares: Vec<Vec<Share<'_>>> = nets.iter().map(|_| Vec::with_capacity(k)).collect();
        for chunk in &mut self.chunks[..k] {
            let Chunk {
                caches,
                douts,
                grads,
                ..
            } = chunk;
            douts.resize_with(nets.len(), Vec::new);
            let mut caches: Vec<Option<&mut NetCache>> =
                caches[Use::Train as usize].iter_mut().map(Some).collect();
            let grads = disjoint_mut(grads, ranges);
            for (j, (dout, g)) in douts.iter_mut().zip(grads).enumerate() {
                let cache = caches[nets[j]].take().expect("a network fused twice");
                shares[j].push((cache, dout, g));
            }
        }
        ensure_len(&mut self.transposed, self.params.len());
        let wts = disjoint_mut(&mut self.transposed, ranges);
        let mut work: Vec<Vec<_>> = (0..lanes).map(|_| Vec::new()).collect();
        for (j, (share, wt)) in shares.into_iter().zip(wts).enumerate() {
            let n = nets[j];
            let mlp = self.rebased[n].as_ref().expect("lanes run MLPs");
            // The caller marks them fresh here, not the lanes there: the flags share a
            // cache line, which each lane's write took from the other core.
            let stale = !std::mem::replace(&mut self.transposed_fresh[n], true);
            let params = &self.params[ranges[j].clone()];
            work[j % lanes].push((j, mlp, params, wt, stale, share));
        }
        let pool = self.pool.as_deref().expect("lanes run on the pool");
        pool.lanes_mut(&mut work, |_, nets_of_lane| {
            for (j, mlp, params, wt, stale, share) in nets_of_lane.iter_mut() {
                if *stale {
                    mlp.transpose_weights(params, wt, 0);
                }
                let weights = Params {
                    flat: params,
                    transposed: Some(wt),
                };
                for (c, (cache, dout, grads)) in share.iter_mut().enumerate() {
                    let r = chunk_rows(rows, k, c);
                    let y = mlp.forward_rows(params, x.slice(r.clone()), &mut cache.mlp);
                    dout.resize(y.len(), 0.0);
                    loss(r, *j, y, dout);
                    mlp.backward_with(weights, Some(grads), true, dout, &mut cache.mlp, None);
                }
            }
        });
        if self.lane_plan.as_ref().is_none_or(|p| p.nets != nets) {
            self.lane_plan = Some(LanePlan::new(nets, ranges, lanes, &self.slices));
        }
        self.lanes_pending = true;
    }

    /// Brings the transposed weights of `nets` up to date ([`Native::transposed`]), the
    /// stale networks' in one pool job.
    fn transpose(&mut self, nets: impl IntoIterator<Item = usize>) {
        let layout = &self.layout.nets;
        let mut stale: Vec<usize> = nets
            .into_iter()
            .filter(|&n| !self.transposed_fresh[n])
            .collect();
        if stale.is_empty() {
            return;
        }
        stale.sort_unstable();
        stale.dedup();
        ensure_len(&mut self.transposed, self.params.len());
        // One slice of `transposed` per network: networks never overlap (`validate`).
        let ranges: Vec<Range<usize>> = stale
            .iter()
            .map(|&n| layout[n].start()..layout[n].end())
            .collect();
        let mut work: Vec<_> = stale
            .iter()
            .copied()
            .zip(disjoint_mut(&mut self.transposed, &ranges))
            .collect();
        for &n in &stale {
            self.transposed_fresh[n] = true;
        }
        let params = &self.params;
        for_each(self.pool.as_deref(), &mut work, |_, (n, wt)| {
            layout[*n].transpose_weights(params, wt)
        });
    }

    /// Forward passes of `nets` on the same rows, with the parameters (outputs in
    /// `self.outs`; the backward pass splits by this pass's chunks) or the target
    /// parameters (outputs in `self.target_outs`). A `train` pass is split into the
    /// larger chunks of a pass a backward pass follows.
    fn pass(&mut self, target: bool, train: bool, nets: &[usize], x: &[f32], rows: usize) {
        let min_rows = if train {
            self.min_rows.1
        } else {
            self.min_rows.0
        };
        let k = chunk_count(rows, min_rows);
        self.ensure_chunks(k);
        let use_ = match (target, train) {
            (true, _) => Use::Target,
            (false, true) => Use::Train,
            (false, false) => Use::Infer,
        };
        let (params, outs) = if target {
            assert_eq!(
                self.target.len(),
                self.params.len(),
                "forward_target before init_target"
            );
            (&self.target, &mut self.target_outs)
        } else {
            for &n in nets {
                self.pass_rows[n] = Some((rows, k, use_));
            }
            (&self.params, &mut self.outs)
        };
        chunked_forward(
            self.pool.as_deref(),
            self.collective.as_deref(),
            &mut self.bufs,
            &mut self.chunks,
            use_,
            nets,
            &self.layout.nets,
            params,
            x,
            rows,
            k,
            outs,
        );
    }

    /// The backward passes `(net, dout)` of forward passes over `rows` rows split in
    /// `k > 1` chunks: one pool job computes every chunk's gradients; the next step adds
    /// them up in chunk order.
    fn chunked_backward(&mut self, passes: &[(usize, &[f32])], rows: usize, k: usize, use_: Use) {
        let ranges = self.begin_backward(passes.iter().map(|(n, _)| *n));
        self.transpose(passes.iter().map(|(n, _)| *n));
        let (nets, params) = (&self.layout.nets, weights(&self.params, &self.transposed));
        let ranks = self.collective.as_deref();
        for_each(self.pool.as_deref(), &mut self.chunks[..k], |c, chunk| {
            if !mine(ranks, c) {
                return; // another rank's: gathered before the gradients are added
            }
            let r = chunk_rows(rows, k, c);
            for (net, dout) in passes {
                let od = nets[*net].output_dim();
                nets[*net].backward_set(
                    params,
                    &mut chunk.grads,
                    &dout[r.start * od..r.end * od],
                    &mut chunk.caches[use_ as usize][*net],
                );
            }
        });
        // Added to the accumulator, in chunk order, by the next step (or `grads`).
        self.pending.extend(ranges.into_iter().map(|r| (r, k)));
    }

    /// The parameter ranges of `nets`, whose chunk gradients a backward pass is about to
    /// compute; a pending gradient of the same parameters (a second pass before the
    /// step) is added to the accumulator first.
    fn begin_backward(&mut self, nets: impl Iterator<Item = usize>) -> Vec<Range<usize>> {
        let ranges: Vec<Range<usize>> = nets
            .map(|n| self.layout.nets[n].start()..self.layout.nets[n].end())
            .collect();
        let overlaps = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end;
        if self
            .pending
            .iter()
            .any(|(r, _)| ranges.iter().any(|q| overlaps(r, q)))
        {
            self.flush();
        }
        ranges
    }

    /// Adds every pending chunk gradient to the accumulator.
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.gather();
        let (pending, chunks) = (&self.pending, &self.chunks);
        let at = &self.slices;
        let mut slices: Vec<_> = tiles_mut(&mut self.grads, at).collect();
        for_each(self.pool.as_deref(), &mut slices, |s, g| {
            add_pending(g, at[s].start, pending, chunks);
        });
        self.pending.clear();
    }

    /// Every rank's pending chunk gradients, on every rank.
    fn gather(&mut self) {
        if let Some(c) = &self.collective {
            gather_pending(c.as_ref(), &self.pending, &mut self.chunks, &mut self.bufs);
        }
    }

    /// Shares the backward passes with the other ranks of `c` (MPI data-parallel
    /// training): chunk `i` of a pass's gradient is computed by rank `i % size` only, the
    /// chunk gradients are gathered before they are added, and every rank adds them in
    /// chunk order and takes the same step. The chunks are the ones a single process
    /// splits a pass into, so the result equals a one-process run's, bit for bit, with
    /// any number of ranks and threads. Every rank runs the forward passes whole (the
    /// losses need every row's output) and must make the same calls.
    pub fn collective(mut self, c: Arc<dyn Collective>) -> Native {
        self.collective = Some(c);
        self
    }

    /// Runs the chunks of each pass on the process's shared pool of `threads` threads
    /// (1: on the calling thread). The results do not depend on it.
    pub fn threads(mut self, threads: usize) -> Result<Native, NnError> {
        self.pool = Pool::shared_for(threads).map_err(|e| NnError::Config(e.to_string()))?;
        Ok(self)
    }

    /// A network trained by Adam (epsilon `adam_eps`), its passes on `threads` threads:
    /// how the replay-buffer learners make each of theirs.
    pub fn with_adam(
        layout: &NetLayout,
        params: &[f32],
        adam_eps: f64,
        threads: usize,
    ) -> Result<Native, NnError> {
        Native::new(layout, params, Adam::new(params.len(), adam_eps)).threads(threads)
    }

    /// The [`BackendMaker`] for the native path.
    pub fn maker() -> BackendMaker {
        Arc::new(|layout, params, opt| Ok(Box::new(Native::new(layout, params, opt))))
    }

    /// The [`BackendMaker`] of the native path on `threads` threads, sharing its
    /// backward passes with the ranks of `c` ([`Native::collective`]).
    pub fn ranks_maker(threads: usize, c: Arc<dyn Collective>) -> BackendMaker {
        Arc::new(move |layout, params, opt| {
            let n = Native::new(layout, params, opt).threads(threads)?;
            Ok(Box::new(n.collective(c.clone())))
        })
    }

    /// `v` (laid out as `layout`) as the caller lays it out.
    fn outer_vec(&self, v: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; self.outer.total];
        relayout(&self.layout, v, &self.outer, &mut out);
        out
    }

    /// `v` (laid out as the caller's layout) into `dst` (laid out as `layout`).
    fn inner_from(&self, v: &[f32], dst: &mut Paged) {
        relayout(&self.outer, v, &self.layout, dst);
    }

    /// Makes sure `k` chunks exist with room for every network.
    fn ensure_chunks(&mut self, k: usize) {
        let nets = self.layout.nets.len();
        while self.chunks.len() < k {
            self.chunks.push(Chunk {
                caches: std::array::from_fn(|_| vec![NetCache::default(); nets]),
                outs: vec![Vec::new(); nets],
                douts: Vec::new(),
                dx: Vec::new(),
                grads: Paged::zeros(self.layout.total),
            });
        }
    }
}

impl NetBackend for Native {
    fn device(&self) -> String {
        "cpu".into()
    }

    fn forward(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32] {
        self.pass(false, false, &[net], x, rows);
        &self.outs[net]
    }

    fn forward_train(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32] {
        // The native forward always keeps its activations; a training pass is split
        // into a backward pass's chunks.
        self.pass(false, true, &[net], x, rows);
        &self.outs[net]
    }

    fn forward_into(
        &mut self,
        weights: Weights,
        nets: &[usize],
        x: &[f32],
        rows: usize,
        outs: &mut [&mut [f32]],
    ) {
        let target = weights == Weights::Target;
        self.pass(target, !target, nets, x, rows);
        let stored = if target {
            &self.target_outs
        } else {
            &self.outs
        };
        for (&net, out) in nets.iter().zip(outs.iter_mut()) {
            out.copy_from_slice(&stored[net]);
        }
    }

    fn backward_many(&mut self, passes: &[(usize, &[f32])]) {
        let rows_of = |n: usize| {
            self.pass_rows[n]
                .unwrap_or_else(|| panic!("backward of network {n} before its forward pass"))
        };
        let Some((rows, k, use_)) = passes.first().map(|(n, _)| rows_of(*n)) else {
            return;
        };
        if passes.iter().any(|(n, _)| rows_of(*n) != (rows, k, use_)) {
            // Passes split differently: one at a time.
            for pass in passes {
                self.backward_many(std::slice::from_ref(pass));
            }
            return;
        }
        for (n, dout) in passes {
            let od = self.layout.nets[*n].output_dim();
            assert_eq!(dout.len(), rows * od, "backward: gradient shape");
        }
        if k > 1 {
            self.chunked_backward(passes, rows, k, use_);
            return;
        }
        // One chunk: straight into the accumulator.
        for (n, dout) in passes {
            self.layout.nets[*n].backward(
                &self.params,
                &mut self.grads,
                dout,
                &mut self.chunks[0].caches[use_ as usize][*n],
            );
        }
    }

    fn backward(&mut self, net: usize, dout: &[f32]) {
        self.backward_many(&[(net, dout)]);
    }

    fn train_fused(
        &mut self,
        nets: &[usize],
        x: Rows<'_>,
        block: usize,
        loss: &ChunkLoss<'_>,
    ) -> bool {
        let rows = x.len();
        // Fused where the passes are split at all (one chunk runs on the calling thread
        // either way), in whole blocks, and not over MPI ranks (each rank runs the
        // forward passes whole there).
        let k = chunk_count(rows, self.min_rows.1);
        let whole = |c| {
            let r = chunk_rows(rows, k, c);
            r.start.is_multiple_of(block) && (r.end.is_multiple_of(block) || r.end == rows)
        };
        if k < 2 || self.collective.is_some() || !(0..k).all(whole) {
            return false;
        }
        for &n in nets {
            let din = self.layout.nets[n].input_dim();
            assert_eq!(x.dim(), din, "train_fused: input width");
        }
        self.ensure_chunks(k);
        let ranges = self.begin_backward(nets.iter().copied());
        for &n in nets {
            self.pass_rows[n] = Some((rows, k, Use::Train));
        }
        if let Some(lanes) = self.lane_count(nets) {
            self.train_lanes(lanes, nets, &ranges, x, k, loss);
            self.pending.extend(ranges.into_iter().map(|r| (r, k)));
            return true;
        }
        self.transpose(nets.iter().copied());
        let (layout, weights) = (&self.layout.nets, weights(&self.params, &self.transposed));
        let params = weights.flat;
        for_each(self.pool.as_deref(), &mut self.chunks[..k], |c, chunk| {
            let r = chunk_rows(rows, k, c);
            let Chunk {
                caches,
                douts,
                grads,
                ..
            } = chunk;
            let caches = &mut caches[Use::Train as usize];
            douts.resize_with(nets.len(), Vec::new);
            // Each network's loss is its own: forward, loss on the output where the
            // forward pass left it, backward.
            for (j, (&n, d)) in nets.iter().zip(douts.iter_mut()).enumerate() {
                let y = layout[n].forward_rows(params, x.slice(r.clone()), &mut caches[n]);
                d.resize(y.len(), 0.0);
                loss(r.clone(), j, y, d);
                layout[n].backward_set(weights, grads, d, &mut caches[n]);
            }
        });
        // Added to the accumulator, in chunk order, by the next step (or `grads`).
        self.pending.extend(ranges.into_iter().map(|r| (r, k)));
        true
    }

    fn add_free_grad(&mut self, g: &[f32]) {
        for (a, b) in self.grads[self.layout.free.clone()].iter_mut().zip(g) {
            *a += b;
        }
    }

    fn free_params(&mut self) -> &[f32] {
        &self.params[self.layout.free.clone()]
    }

    fn grads(&self) -> Vec<f32> {
        let mut g = self.grads.to_vec();
        match &self.collective {
            None => add_pending(&mut g, 0, &self.pending, &self.chunks),
            Some(c) => {
                let mut chunks = self.chunks.clone();
                gather_pending(c.as_ref(), &self.pending, &mut chunks, &mut Bufs::default());
                add_pending(&mut g, 0, &self.pending, &chunks);
            }
        }
        self.outer_vec(&g)
    }

    fn step(&mut self, lr: f64, max_grad_norm: f64) -> f64 {
        // Per slice of parameters: the pending chunk gradients, then the slice's squared
        // norm; then, once every slice's norm is in, clip and the optimiser update. Slices
        // are fixed, so the norm and every parameter come out the same on any number of
        // threads.
        self.gather();
        let pool = self.pool.as_deref();
        let owner = std::mem::take(&mut self.lanes_pending)
            .then_some(self.lane_plan.as_ref())
            .flatten()
            .map(|p| p.slice_lane.as_slice());
        self.sumsq.resize_with(self.slices.len(), Default::default);
        let (at, sumsq) = (&self.slices, &self.sumsq);
        let (pending, chunks) = (&self.pending, &self.chunks);
        let add = |s: usize, g: &mut [f32]| {
            add_pending(g, at[s].start, pending, chunks);
            sumsq[s].store(sum_squares(g).to_bits(), Ordering::Relaxed);
        };
        let norm = || {
            sumsq
                .iter()
                .map(|q| f64::from_bits(q.load(Ordering::Relaxed)))
                .sum::<f64>()
                .sqrt()
        };
        let rule = self.opt.begin(lr);
        let update = |clip: Option<f32>, (p, g, m, v): &mut Tiles<'_>| {
            if let Some(c) = clip {
                g.iter_mut().for_each(|x| *x *= c);
            }
            rule.apply(p, g, m, v);
            g.fill(0.0);
        };
        let mut work: Vec<Tiles<'_>> = tiles_mut(&mut self.params, at)
            .zip(tiles_mut(&mut self.grads, at))
            .zip(tiles_mut(&mut self.m, at).zip(tiles_mut(&mut self.v, at)))
            .map(|((p, g), (m, v))| (p, g, m, v))
            .collect();
        if max_grad_norm == f64::INFINITY {
            // Without clipping nothing waits for the norm: each slice adds its pending
            // gradients, takes its squared norm and its update in one pass (DDPG/TD3/SAC).
            for_each_slice(pool, owner, &mut work, |s, w| {
                add(s, w.1);
                update(None, w);
            });
        } else if let (Some(p), Some(owner)) = (pool, owner) {
            // On lanes, one job: each lane's slices, a barrier, the norm (every lane sums
            // all the slices' in the same order), each lane's updates. Two jobs before:
            // the caller read each lane's norms and the workers found the second job's
            // work list in the caller's cache (PPO CartPole: ~16 k minibatches a run).
            let clip = || clip_factor(norm(), max_grad_norm);
            p.lanes_phased_mut(
                &mut by_lane(p, owner, &mut work),
                &[
                    &|_, slices| slices.iter_mut().for_each(|(s, w)| add(*s, w.1)),
                    &|_, slices| {
                        let c = clip();
                        slices.iter_mut().for_each(|(_, w)| update(c, w));
                    },
                ],
            );
        } else {
            for_each(pool, &mut work, |s, w| add(s, w.1));
            let clip = clip_factor(norm(), max_grad_norm);
            for_each(pool, &mut work, |_, w| update(clip, w));
        }
        drop(work);
        self.pending.clear();
        self.transposed_fresh.fill(false);
        norm()
    }

    fn params(&self) -> Vec<f32> {
        self.outer_vec(&self.params)
    }

    fn set_params(&mut self, params: &[f32]) {
        assert_eq!(
            params.len(),
            self.outer.total,
            "set_params: parameter count"
        );
        let mut p = std::mem::take(&mut self.params);
        self.inner_from(params, &mut p);
        self.params = p;
        self.transposed_fresh.fill(false);
    }

    fn optimizer(&self) -> OptimState {
        Adam {
            m: self.outer_vec(&self.m),
            v: self.outer_vec(&self.v),
            ..self.opt.clone()
        }
    }

    fn set_optimizer(&mut self, mut state: OptimState) {
        assert_eq!(state.m.len(), self.outer.total, "set_optimizer: size");
        let (mut m, mut v) = (std::mem::take(&mut self.m), std::mem::take(&mut self.v));
        self.inner_from(&std::mem::take(&mut state.m), &mut m);
        self.inner_from(&std::mem::take(&mut state.v), &mut v);
        (self.m, self.v, self.opt) = (m, v, state);
    }

    fn input_grad(&mut self, net: usize, dout: &[f32]) -> &[f32] {
        self.transpose([net]);
        let Net::Mlp(m) = &self.layout.nets[net] else {
            panic!("input_grad: network {net} is not an MLP (input gradients are kept for MLPs)")
        };
        let (rows, k, use_) = self.pass_rows[net]
            .unwrap_or_else(|| panic!("input_grad of network {net} before its forward pass"));
        let (id, od) = (m.input_dim(), m.output_dim());
        assert_eq!(dout.len(), rows * od, "input_grad: gradient shape");
        self.dinput.resize(rows * id, 0.0);
        let mut work = rows_of_chunks(&mut self.chunks[..k], &mut self.dinput, rows, id);
        // One chunk: every rank computes it (as the forward pass did).
        let ranks = self.collective.as_deref().filter(|_| k > 1);
        let params = weights(&self.params, &self.transposed);
        for_each(self.pool.as_deref(), &mut work, |c, (chunk, dx)| {
            if !mine(ranks, c) {
                return; // another rank's: gathered below
            }
            let r = chunk_rows(rows, k, c);
            let cache = &mut chunk.caches[use_ as usize][net].mlp;
            let d = &dout[r.start * od..r.end * od];
            m.backward_with(params, None, false, d, cache, Some(dx));
        });
        if let Some(c) = ranks {
            let own = self.dinput.clone();
            let locals: Vec<Vec<&[f32]>> = (0..k)
                .map(|ch| {
                    let r = chunk_rows(rows, k, ch);
                    vec![&own[r.start * id..r.end * id]]
                })
                .collect();
            gather_rows(
                c,
                rows,
                k,
                &[id],
                &locals,
                &mut [&mut self.dinput],
                &mut self.bufs,
            );
        }
        &self.dinput
    }

    fn input_grad_sum(&mut self, passes: &[(usize, &[f32])], out: &mut [f32]) {
        // One job for every network where their passes were split alike (MLPs on one
        // process); else one network at a time. Either way the same bits: each row's
        // gradients are added in the passes' order.
        let Some((first, _)) = passes.first() else {
            return;
        };
        let split = self.pass_rows[*first];
        let together = self.collective.is_none()
            && passes.len() > 1
            && passes.iter().all(|(n, _)| {
                self.pass_rows[*n] == split && matches!(self.layout.nets[*n], Net::Mlp(_))
            });
        let Some((rows, k, use_)) = split.filter(|(_, k, _)| together && *k > 1) else {
            return super::sum_input_grads(self, passes, out);
        };
        let id = self.layout.nets[*first].input_dim();
        assert_eq!(out.len(), rows * id, "input_grad_sum: output shape");
        for (n, dout) in passes {
            let net = &self.layout.nets[*n];
            assert_eq!(net.input_dim(), id, "input_grad_sum: input widths differ");
            assert_eq!(
                dout.len(),
                rows * net.output_dim(),
                "input_grad_sum: gradient shape"
            );
        }
        self.transpose(passes.iter().map(|(n, _)| *n));
        let mut work = rows_of_chunks(&mut self.chunks[..k], out, rows, id);
        let (nets, params) = (&self.layout.nets, weights(&self.params, &self.transposed));
        for_each(self.pool.as_deref(), &mut work, |c, (chunk, dx)| {
            let r = chunk_rows(rows, k, c);
            for (i, (n, dout)) in passes.iter().enumerate() {
                let Net::Mlp(m) = &nets[*n] else {
                    unreachable!("checked: MLPs")
                };
                let od = m.output_dim();
                let d = &dout[r.start * od..r.end * od];
                let cache = &mut chunk.caches[use_ as usize][*n].mlp;
                if i == 0 {
                    m.backward_with(params, None, false, d, cache, Some(dx));
                } else {
                    chunk.dx.resize(dx.len(), 0.0);
                    m.backward_with(params, None, false, d, cache, Some(&mut chunk.dx));
                    dx.iter_mut().zip(&chunk.dx).for_each(|(o, v)| *o += v);
                }
            }
        });
    }

    fn init_target(&mut self) {
        self.target.clone_from(&self.params);
    }

    fn forward_target(&mut self, net: usize, x: &[f32], rows: usize) -> &[f32] {
        self.pass(true, false, &[net], x, rows);
        &self.target_outs[net]
    }

    fn soft_update(&mut self, tau: f32) {
        assert_eq!(
            self.target.len(),
            self.params.len(),
            "soft_update before init_target"
        );
        for (t, o) in self.target.iter_mut().zip(self.params.iter()) {
            *t += tau * (o - *t);
        }
    }

    fn target_params(&self) -> Vec<f32> {
        // Empty before `init_target` (a backend without target networks).
        if self.target.is_empty() {
            Vec::new()
        } else {
            self.outer_vec(&self.target)
        }
    }

    fn set_target_params(&mut self, target: &[f32]) {
        assert_eq!(
            target.len(),
            self.outer.total,
            "set_target_params: parameter count"
        );
        let mut t = Paged::zeros(self.layout.total);
        self.inner_from(target, &mut t);
        self.target = t;
    }
}
