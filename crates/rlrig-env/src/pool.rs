//! The worker pool that env stepping and the learner share.
//!
//! One job at a time: [`Pool::run`] hands out task indices `0..n` to the calling thread and
//! the pool's workers, and returns when every task has run. Results never depend on which
//! thread ran a task or how many threads there are: callers split their work into pieces
//! whose size does not depend on the thread count and combine them in index order.
//!
//! Why not rayon: its sleeping workers cost a futex wake-up per job. Measured on an AMD
//! EPYC 2-core VM (2026-11-25), 4,096 CartPole envs stepped 70.3 M steps/s on one thread
//! and 77-82 M on two through `rayon::ThreadPool::in_place_scope` (1.10-1.17x); a learner
//! update of 128 rows, a few tens of microseconds of work split in two, paid the same.
//! Here workers spin on the job counter for a while before they park (how long is
//! measured at start: many times one wake-up), so back-to-back jobs, as a training loop
//! makes, start within a cache-line transfer.
//!
//! [`Pool::lanes_mut`] instead gives each thread its own fixed piece of work (lane `i`
//! always on the same thread), for work whose data should stay in one core's cache from
//! one job to the next: PPO's actor on one core and its critic on the other keep each
//! network's weights, gradients and optimiser state where they are used.
//!
//! Workers are shared: [`Pool::shared`] returns the same pool for the same thread count
//! within a process, so the executor and the learner never run two sets of spinning
//! threads on the same cores. A job started while another runs on the same pool (actor
//! threads, nested calls) runs all its tasks on the calling thread instead of waiting.

use crossbeam_utils::CachePadded;
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The job word: `job number << 34 | task count << 17 | next unclaimed task`. A worker
/// claims a task with one compare-and-swap on it, which also proves that the job is still
/// the one it read (see [`Shared::work`]). An odd job number marks a job of lanes
/// ([`Pool::lanes_mut`]): no task is claimed, each thread runs its own.
const INDEX_BITS: u32 = 17;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
const NUMBER_SHIFT: u32 = 2 * INDEX_BITS;
/// The most tasks one job may have.
pub const MAX_TASKS: usize = INDEX_MASK as usize;

/// Time spent inside tasks, per thread slot (0: the threads that call [`Pool::run`],
/// `i`: worker `i - 1` of any pool), in nanoseconds, for the profile's "busy" figures:
/// a spinning worker is busy to the OS but not working. Each slot on its own cache line:
/// every task adds to its thread's, and slots sharing a line made each job's end move
/// that line between the cores.
static TASK_NS: [CachePadded<AtomicU64>; SLOTS] =
    [const { CachePadded::new(AtomicU64::new(0)) }; SLOTS];
const SLOTS: usize = 257;

/// Seconds spent in tasks so far by the calling threads (first) and each worker, up to
/// the last worker that ran one.
pub fn task_seconds() -> Vec<f64> {
    let v: Vec<u64> = TASK_NS.iter().map(|t| t.load(Ordering::Relaxed)).collect();
    let used = v.iter().rposition(|&t| t > 0).map_or(0, |i| i + 1);
    v[..used].iter().map(|&t| t as f64 * 1e-9).collect()
}

/// How many traces want tasks recorded ([`record_tasks`]).
static RECORDERS: AtomicUsize = AtomicUsize::new(0);
/// Recorded tasks: (thread slot, start, end).
static RECORDED: Mutex<Vec<(usize, Instant, Instant)>> = Mutex::new(Vec::new());

/// A trace starts (`true`) or stops (`false`) wanting every task's thread slot and
/// interval recorded, for one track per worker; tasks are recorded while any trace
/// wants them. Off by default: recording takes a lock per task.
pub fn record_tasks(on: bool) {
    if on {
        RECORDERS.fetch_add(1, Ordering::Relaxed);
    } else {
        let _ = RECORDERS.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// The tasks recorded since the last call: `(slot, start, end)`, slot as in
/// [`task_seconds`] (0: a calling thread, `i`: worker `i - 1`).
pub fn take_recorded_tasks() -> Vec<(usize, Instant, Instant)> {
    std::mem::take(&mut *RECORDED.lock().unwrap_or_else(|e| e.into_inner()))
}

fn account(slot: usize, t0: Instant) {
    let t1 = Instant::now();
    TASK_NS[slot.min(SLOTS - 1)].fetch_add((t1 - t0).as_nanos() as u64, Ordering::Relaxed);
    if RECORDERS.load(Ordering::Relaxed) > 0 {
        RECORDED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((slot, t0, t1));
    }
}

/// A job as the workers see it: its phases' functions (a job of tasks has one). It lives on the stack of
/// [`Pool::run`], which returns only after every task has finished.
struct Job<'a> {
    phases: &'a [&'a (dyn Fn(usize) + Sync)],
}

#[derive(Default)]
struct Shared {
    /// See [`NUMBER_SHIFT`]: job number, task count, next unclaimed task. The idle
    /// workers spin on it, so it, `done` and `arrived` each have a cache line: sharing
    /// one, every store the caller makes to start a job, and every task counted done,
    /// took the line from the spinning workers and back.
    word: CachePadded<AtomicU64>,
    /// The running job; written before `word` announces it.
    job: AtomicPtr<Job<'static>>,
    /// Tasks finished in the running job.
    done: CachePadded<AtomicUsize>,
    /// Lanes of the running job (of phases) at its barriers so far, over all barriers.
    arrived: CachePadded<AtomicUsize>,
    /// Workers parked on `wake` (the caller notifies only when there are some).
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    shutdown: AtomicBool,
    /// A task's panic, re-raised on the calling thread.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

impl Shared {
    fn job_number(word: u64) -> u64 {
        word >> NUMBER_SHIFT
    }

    /// Whether job `number` is a job of lanes (see [`NUMBER_SHIFT`]).
    fn lanes(number: u64) -> bool {
        number & 1 == 1
    }

    /// Runs lane `slot` of job `number` (a job of lanes) when the job has one, every
    /// phase of it with a barrier between phases, and counts this thread done either
    /// way: the caller waits for every thread.
    fn lane(&self, word: u64, slot: usize) {
        let n = ((word >> INDEX_BITS) & INDEX_MASK) as usize;
        if slot < n {
            // SAFETY: the caller of a job of lanes returns only after every thread of the
            // pool, this one included, has added to `done` below, so the `Job` its frame
            // owns is alive here; its pointer was stored before the word that announced
            // the job, which this thread read with Acquire.
            let phases = unsafe { (*self.job.load(Ordering::Acquire)).phases };
            let mut ok = true;
            for (p, f) in phases.iter().enumerate() {
                // A lane whose phase panicked runs no more of its phases, but still meets
                // the others at every barrier (they would wait for it forever).
                ok = ok && self.run_task(*f, slot, slot);
                if p + 1 < phases.len() {
                    self.arrived.fetch_add(1, Ordering::AcqRel);
                    wait_until(|| self.arrived.load(Ordering::Acquire) >= (p + 1) * n);
                }
            }
        }
        self.done.fetch_add(1, Ordering::AcqRel);
    }

    /// Runs `f(i)` on thread `slot`, keeping a panic for the caller (false) and counting
    /// the time.
    fn run_task(&self, f: &(dyn Fn(usize) + Sync), i: usize, slot: usize) -> bool {
        let t0 = Instant::now();
        let ok = match catch_unwind(AssertUnwindSafe(|| f(i))) {
            Ok(()) => true,
            Err(p) => {
                self.panic
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(p);
                false
            }
        };
        account(slot, t0);
        ok
    }

    /// Claims and runs tasks of job `number` until none is left. Returns when the job
    /// has no unclaimed task (or a newer job is announced).
    fn work(&self, number: u64, slot: usize) {
        loop {
            let word = self.word.load(Ordering::Acquire);
            if Self::job_number(word) != number {
                return;
            }
            let (n, i) = ((word >> INDEX_BITS) & INDEX_MASK, word & INDEX_MASK);
            if i >= n {
                return;
            }
            if self
                .word
                .compare_exchange_weak(word, word + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            // SAFETY: the CAS claimed task `i < n` of job `number` (the word holds the job's
            // number and task count, so no stale count is read), which therefore has an
            // unfinished task: its `Pool::run` frame, which owns the `Job`, waits for `done`
            // to reach `n`, and a newer job's pointer is stored only after that. The pointer
            // was stored before the word announced the job, and the CAS (AcqRel) reads
            // that announcement or a claim after it, so this load sees the job's pointer.
            let f = unsafe { (*self.job.load(Ordering::Acquire)).phases[0] };
            self.run_task(f, i as usize, slot);
            self.done.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn worker(&self, slot: usize, spin: Duration) {
        // Job numbers start at 1, so a job announced before this thread first looks is
        // still new to it (reading the word here would take that job for a seen one and
        // leave all its tasks to the caller). A job that has already finished is harmless:
        // `work` finds no unclaimed task.
        let mut seen = 0;
        loop {
            // Spin on the job word for `spin`, then park.
            let start = Instant::now();
            let mut rounds = 0u32;
            let (number, word) = loop {
                let word = self.word.load(Ordering::Acquire);
                let n = Self::job_number(word);
                if n != seen || self.shutdown.load(Ordering::Relaxed) {
                    break (n, word);
                }
                std::hint::spin_loop();
                rounds = rounds.wrapping_add(1);
                if rounds.is_multiple_of(64) && start.elapsed() >= spin {
                    let mut guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                    self.sleepers.fetch_add(1, Ordering::SeqCst);
                    loop {
                        let n = Self::job_number(self.word.load(Ordering::SeqCst));
                        if n != seen || self.shutdown.load(Ordering::SeqCst) {
                            break;
                        }
                        guard = self.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
                    }
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                    drop(guard);
                }
            };
            if self.shutdown.load(Ordering::Acquire) {
                return;
            }
            seen = number;
            if Self::lanes(number) {
                // `word` announced this job, and stays the word until this thread counts
                // itself done (the caller waits for it).
                self.lane(word, slot);
            } else {
                self.work(number, slot);
            }
        }
    }
}

/// A fixed set of worker threads plus the caller. See the module docs.
pub struct Pool {
    shared: Arc<Shared>,
    /// Held while a job runs: a second caller runs its tasks itself.
    busy: Mutex<()>,
    threads: usize,
    spin: Duration,
    handles: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads)
            .field("spin", &self.spin)
            .finish()
    }
}

impl Pool {
    /// A pool of `threads` threads in all: the caller and `threads - 1` workers.
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let threads = threads.max(1);
        let shared = Arc::new(Shared::default());
        let spin = spin_time();
        let mut handles = Vec::with_capacity(threads - 1);
        for i in 0..threads - 1 {
            let s = Arc::clone(&shared);
            handles.push(
                std::thread::Builder::new()
                    .name(format!("rlrig-worker-{i}"))
                    .spawn(move || s.worker(i + 1, spin))?,
            );
        }
        Ok(Pool {
            shared,
            busy: Mutex::new(()),
            threads,
            spin,
            handles,
        })
    }

    /// The process's pool of `threads` threads, started on first use and shared by every
    /// caller that asks for the same count while one is alive.
    pub fn shared(threads: usize) -> std::io::Result<Arc<Pool>> {
        static POOLS: OnceLock<Mutex<HashMap<usize, Weak<Pool>>>> = OnceLock::new();
        let threads = threads.max(1);
        let mut pools = POOLS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(p) = pools.get(&threads).and_then(Weak::upgrade) {
            return Ok(p);
        }
        let p = Arc::new(Pool::new(threads)?);
        pools.retain(|_, w| w.strong_count() > 0);
        pools.insert(threads, Arc::downgrade(&p));
        Ok(p)
    }

    /// [`Pool::shared`] when `threads` > 1, and none (work runs on the caller) for 1; the
    /// error names the thread count that would not start.
    pub fn shared_for(threads: usize) -> std::io::Result<Option<Arc<Pool>>> {
        if threads <= 1 {
            return Ok(None);
        }
        Pool::shared(threads).map(Some).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot start {threads} threads: {e}"))
        })
    }

    /// Threads that run tasks, the caller included.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// How long an idle worker spins before it parks.
    pub fn spin(&self) -> Duration {
        self.spin
    }

    /// Runs `f(0)`, ..., `f(n - 1)` on the caller and the workers, each exactly once, and
    /// returns when all have run. A panic in a task is re-raised here after the others
    /// finish.
    pub fn run(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        assert!(n <= MAX_TASKS, "Pool::run: {n} tasks (at most {MAX_TASKS})");
        self.start(n, false, &[f]);
    }

    /// Runs `f(0)`, ..., `f(n - 1)`, `n` at most [`Pool::threads`], each on its own
    /// thread: `f(0)` on the caller and `f(i)` on worker `i`, the same thread in every
    /// job (where the pool is busy with another caller's job, all on the caller, in
    /// order). For work whose data should stay in one core's cache between jobs; the
    /// job waits for every worker, so it suits workers that are spinning (back-to-back
    /// jobs), as a training loop's are.
    pub fn lanes(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        self.lanes_phased(n, &[f]);
    }

    /// [`Pool::lanes`] in phases: each lane runs `phases[0](i)`, waits until every lane
    /// has, runs `phases[1](i)`, and so on, all in one job. Phases that must see every
    /// lane's previous phase (a gradient norm summed over all the lanes' slices) thus
    /// cost one barrier instead of a job each. Where the lanes run on the caller alone
    /// (see [`Pool::lanes`]) each phase runs for every lane before the next.
    pub fn lanes_phased(&self, n: usize, phases: &[&(dyn Fn(usize) + Sync)]) {
        assert!(
            n <= self.threads,
            "Pool::lanes: {n} lanes on {} threads",
            self.threads
        );
        self.start(n, true, phases);
    }

    /// [`Pool::run`] or [`Pool::lanes_phased`].
    fn start(&self, n: usize, lanes: bool, phases: &[&(dyn Fn(usize) + Sync)]) {
        let guard = if self.threads > 1 && n > 1 {
            self.busy.try_lock().ok()
        } else {
            None
        };
        let Some(_guard) = guard else {
            // One thread, one task, or the pool is busy: run here, in index order.
            let t0 = Instant::now();
            phases.iter().for_each(|f| (0..n).for_each(f));
            account(0, t0);
            return;
        };
        let s = &*self.shared;
        let job = Job { phases };
        s.done.store(0, Ordering::Relaxed);
        s.arrived.store(0, Ordering::Relaxed);
        // SAFETY (of the workers' later dereference): `job` outlives every use, because
        // this function returns only after `done == n`, i.e. after every claimed task ran,
        // and a worker dereferences the pointer only for a task it claimed (see `work`).
        // The lifetime is erased to store it in the shared slot.
        let ptr = (&job as *const Job<'_>).cast::<Job<'static>>().cast_mut();
        s.job.store(ptr, Ordering::Release);
        // Job numbers wrap long before the word's 30 bits would matter: a worker would
        // have to stall for 2^29 jobs to mistake one job for another. Even numbers are
        // jobs of tasks, odd ones jobs of lanes (every lane claimed from the start).
        let last = Shared::job_number(s.word.load(Ordering::Relaxed));
        let number = ((last >> 1) + 1) << 1 & ((1 << 30) - 1) | u64::from(lanes);
        let claimed = if lanes { n as u64 } else { 0 };
        s.word.store(
            number << NUMBER_SHIFT | (n as u64) << INDEX_BITS | claimed,
            Ordering::SeqCst,
        );
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _l = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        // A job of lanes ends when every thread has counted itself, lane or none.
        let finished = if lanes {
            s.lane(s.word.load(Ordering::Relaxed), 0);
            self.threads
        } else {
            s.work(number, 0);
            n
        };
        wait_until(|| s.done.load(Ordering::Acquire) >= finished);
        if let Some(p) = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take() {
            resume_unwind(p);
        }
    }

    /// Runs `f(i, &mut items[i])` for every item, as [`Pool::run`].
    pub fn for_each_mut<T: Send>(&self, items: &mut [T], f: impl Fn(usize, &mut T) + Sync) {
        self.each_mut(items, false, f);
    }

    /// Runs `f(i, &mut items[i])` for every item, item `i` on lane `i` ([`Pool::lanes`]).
    pub fn lanes_mut<T: Send>(&self, items: &mut [T], f: impl Fn(usize, &mut T) + Sync) {
        self.each_mut(items, true, f);
    }

    fn each_mut<T: Send>(&self, items: &mut [T], lanes: bool, f: impl Fn(usize, &mut T) + Sync) {
        if lanes {
            self.lanes_phased_mut(items, &[&f]);
        } else {
            let base = SendPtr(items.as_mut_ptr());
            // SAFETY: `run` calls each index in `0..items.len()` exactly once, so each
            // `&mut items[i]` is the only reference to that element, and `items` is
            // borrowed mutably for the whole call.
            self.run(items.len(), &|i| f(i, unsafe { &mut *base.at(i) }));
        }
    }

    /// [`Pool::lanes_phased`] over `items`: lane `i` runs each phase on `&mut items[i]`.
    pub fn lanes_phased_mut<T: Send>(&self, items: &mut [T], phases: &[&LanePhase<'_, T>]) {
        let base = SendPtr(items.as_mut_ptr());
        let tasks: Vec<_> = phases
            .iter()
            .map(|f| {
                move |i| {
                    // SAFETY: a job of lanes runs lane `i` of each phase once, on one
                    // thread, and the phases of a lane one after another, so each
                    // `&mut items[i]` is the only reference to that element while it
                    // lives; `items` is borrowed mutably for the whole call.
                    f(i, unsafe { &mut *base.at(i) })
                }
            })
            .collect();
        let tasks: Vec<&(dyn Fn(usize) + Sync)> =
            tasks.iter().map(|t| t as &(dyn Fn(usize) + Sync)).collect();
        self.lanes_phased(items.len(), &tasks);
    }
}

/// A phase of [`Pool::lanes_phased_mut`]: lane `i` on its item.
pub type LanePhase<'a, T> = dyn Fn(usize, &mut T) + Sync + 'a;

/// Spins until `done()`; after a while yields instead (a thread it waits for may have
/// lost its core).
fn wait_until(done: impl Fn() -> bool) {
    let mut rounds = 0u32;
    while !done() {
        rounds = rounds.saturating_add(1);
        if rounds < 1 << 14 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

/// A raw pointer that may cross threads; [`Pool::for_each_mut`] proves each use sound.
struct SendPtr<T>(*mut T);
impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}
// SAFETY: only used by `for_each_mut`, whose items are `Send` and handed to one task each.
unsafe impl<T: Send> Sync for SendPtr<T> {}
unsafe impl<T: Send> Send for SendPtr<T> {}

impl<T> SendPtr<T> {
    fn at(&self, i: usize) -> *mut T {
        self.0.wrapping_add(i)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let s = &*self.shared;
        s.shutdown.store(true, Ordering::SeqCst);
        {
            let _l = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// How long idle workers spin before parking: 20 times one measured wake-up of a parked
/// thread, at least 50 us and at most 2 ms. `RLRIG_SPIN_US` overrides it (0: park at
/// once, for machines shared with other work).
pub fn spin_time() -> Duration {
    static SPIN: OnceLock<Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        if let Some(us) = std::env::var("RLRIG_SPIN_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            return Duration::from_micros(us);
        }
        (wake_up_cost() * 20).clamp(Duration::from_micros(50), Duration::from_millis(2))
    })
}

/// The median time for a cache line to go from this thread to a spinning thread and back
/// (five samples of ~5 ms of round trips): what each job's start and end and each piece
/// of data moved between two cores cost. On 2-core VMs the same machine kind measured
/// ~60 ns (both vCPUs in one core complex) and ~330 ns (in two), in spells of minutes.
/// None with one CPU (the two threads would take turns on it).
pub fn round_trip_cost() -> Option<Duration> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    let flag = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let theirs = Arc::clone(&flag);
    let t = std::thread::spawn(move || {
        let mut want = 1;
        loop {
            match theirs.load(Ordering::Acquire) {
                u64::MAX => return,
                v if v == want => {
                    theirs.store(want + 1, Ordering::Release);
                    want += 2;
                }
                _ => std::hint::spin_loop(),
            }
        }
    });
    let mut samples = Vec::with_capacity(5);
    let mut next = 1;
    for _ in 0..5 {
        // Trips in batches of 16 (the clock read costs a few ns a trip) until ~5 ms have
        // passed, so a loaded machine that deschedules a thread ends the sample early.
        let (t0, mut trips) = (Instant::now(), 0u32);
        while trips == 0 || t0.elapsed() < Duration::from_millis(5) {
            for _ in 0..16 {
                flag.store(next, Ordering::Release);
                while flag.load(Ordering::Acquire) != next + 1 {
                    std::hint::spin_loop();
                }
                next += 2;
            }
            trips += 16;
        }
        samples.push(t0.elapsed() / trips);
    }
    flag.store(u64::MAX, Ordering::Release);
    let _ = t.join();
    samples.sort();
    Some(samples[samples.len() / 2])
}

/// The median time for a parked thread to run after it is unparked (a few trials).
pub fn wake_up_cost() -> Duration {
    let (tx, rx) = std::sync::mpsc::channel::<Instant>();
    let (back_tx, back_rx) = std::sync::mpsc::channel::<Duration>();
    let t = std::thread::spawn(move || {
        while let Ok(sent) = rx.recv() {
            if back_tx.send(sent.elapsed()).is_err() {
                return;
            }
        }
    });
    let mut samples = Vec::with_capacity(9);
    for _ in 0..9 {
        // Long enough for the receiver to block in the kernel.
        std::thread::sleep(Duration::from_micros(200));
        if tx.send(Instant::now()).is_err() {
            break;
        }
        match back_rx.recv() {
            Ok(d) => samples.push(d),
            Err(_) => break,
        }
    }
    drop(tx);
    let _ = t.join();
    samples.sort();
    samples
        .get(samples.len() / 2)
        .copied()
        .unwrap_or(Duration::from_micros(50))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a job of `n` tasks that only count themselves; returns the count.
    fn tasks_run(pool: &Pool, n: usize) -> usize {
        let count = AtomicUsize::new(0);
        pool.run(n, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        count.load(Ordering::Relaxed)
    }

    #[test]
    fn every_task_runs_once_at_any_thread_count() {
        for threads in [1, 2, 3, 7] {
            let pool = Pool::new(threads).unwrap();
            for n in [0, 1, 2, 5, 64, 1000] {
                let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                for _ in 0..20 {
                    pool.run(n, &|i| {
                        hits[i].fetch_add(1, Ordering::Relaxed);
                    });
                }
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 20));
            }
        }
    }

    #[test]
    fn for_each_mut_writes_every_item() {
        let pool = Pool::new(3).unwrap();
        let mut v = vec![0u64; 999];
        for round in 0..50u64 {
            pool.for_each_mut(&mut v, |i, x| *x += i as u64 + round);
        }
        assert!(
            v.iter()
                .enumerate()
                .all(|(i, x)| *x == 50 * i as u64 + 49 * 50 / 2)
        );
    }

    /// Lane `i` runs on the same thread in every job (lane 0 on the caller), once per
    /// job, mixed with jobs of tasks and with workers that parked in between.
    #[test]
    fn lanes_stay_on_their_threads() {
        let pool = Pool::new(3).unwrap();
        let caller = std::thread::current().id();
        let mut first: Vec<Option<std::thread::ThreadId>> = vec![None; 3];
        for round in 0..200 {
            for n in [3, 2] {
                let mut ids = vec![None; n];
                pool.lanes_mut(&mut ids, |_, id| *id = Some(std::thread::current().id()));
                for (lane, id) in ids.iter().enumerate() {
                    let id = id.expect("every lane runs");
                    assert_eq!(
                        *first[lane].get_or_insert(id),
                        id,
                        "lane {lane}, round {round}"
                    );
                }
            }
            assert_eq!(tasks_run(&pool, 7), 7);
            if round % 50 == 49 {
                // Long enough for the workers to park.
                std::thread::sleep(pool.spin() + Duration::from_millis(20));
            }
        }
        assert_eq!(first[0], Some(caller));
        assert!(first[1] != first[2] && first[1] != Some(caller) && first[2] != Some(caller));
        let mut one = [0u32];
        pool.lanes_mut(&mut one, |i, x| *x = i as u32 + 1);
        assert_eq!(one, [1]);
    }

    /// Each phase of a job of lanes sees every lane's earlier phases: lane `i` writes its
    /// slot in phase 0 and reads all the slots in phase 1, on the pool's threads and
    /// where the job runs on the caller alone (nested in another job).
    #[test]
    fn lanes_phased_meet_at_each_barrier() {
        for threads in [1, 2, 3] {
            let pool = Pool::new(threads).unwrap();
            for round in 0..300u64 {
                for n in 1..=threads {
                    let mut items: Vec<(u64, u64)> = vec![(0, 0); n];
                    let slots: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
                    let write = |i: usize, it: &mut (u64, u64)| {
                        it.0 = round * 10 + i as u64;
                        slots[i].store(it.0, Ordering::Relaxed);
                    };
                    let read = |_: usize, it: &mut (u64, u64)| {
                        it.1 = slots.iter().map(|s| s.load(Ordering::Relaxed)).sum();
                    };
                    let want = (0..n as u64).map(|i| round * 10 + i).sum::<u64>();
                    pool.lanes_phased_mut(&mut items, &[&write, &read]);
                    assert!(
                        items.iter().all(|it| it.1 == want),
                        "threads {threads}, n {n}"
                    );
                }
                // Nested: the pool is busy, so each inner job runs its lanes on the
                // thread that starts it, phase by phase.
                pool.lanes(threads, &|_| {
                    let slots: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
                    let mut v = vec![0u64; threads];
                    pool.lanes_phased_mut(
                        &mut v,
                        &[
                            &|i, _| slots[i].store(i as u64 + 1, Ordering::Relaxed),
                            &|_, x| *x = slots.iter().map(|s| s.load(Ordering::Relaxed)).sum(),
                        ],
                    );
                    let want = (threads * (threads + 1) / 2) as u64;
                    assert!(v.iter().all(|&x| x == want), "nested, threads {threads}");
                });
            }
            // A lane that panics in the first phase still meets the others at the
            // barrier: the panic reaches the caller, and the pool goes on.
            let r = catch_unwind(AssertUnwindSafe(|| {
                pool.lanes_phased(
                    threads,
                    &[&|i| assert!(i + 1 < threads, "lane {i}"), &|_| {}],
                );
            }));
            assert!(r.is_err(), "threads {threads}: the panic was lost");
            assert_eq!(tasks_run(&pool, 5), 5);
        }
    }

    /// A job started the moment a pool is made (before its worker first reads the job
    /// word) is still shared: task 0 waits for task 1, which only another thread can run
    /// while task 0 holds its own. Before the fix a fresh worker took the announced job
    /// for one it had seen and left every task to the caller.
    #[test]
    fn a_fresh_pools_first_job_reaches_its_workers() {
        for _ in 0..5 {
            let pool = Pool::new(2).unwrap();
            let second_ran = AtomicBool::new(false);
            let waited_for_it = AtomicBool::new(true);
            pool.run(2, &|i| {
                if i == 1 {
                    second_ran.store(true, Ordering::Release);
                    return;
                }
                let t0 = Instant::now();
                while !second_ran.load(Ordering::Acquire) {
                    if t0.elapsed() > Duration::from_secs(60) {
                        waited_for_it.store(false, Ordering::Relaxed);
                        return;
                    }
                    std::thread::yield_now();
                }
            });
            assert!(
                waited_for_it.load(Ordering::Relaxed),
                "the worker never took task 1"
            );
        }
    }

    #[test]
    fn parked_workers_wake_for_the_next_job() {
        let pool = Pool::new(2).unwrap();
        std::thread::sleep(pool.spin() + Duration::from_millis(20));
        assert_eq!(tasks_run(&pool, 100), 100);
    }

    #[test]
    fn nested_and_concurrent_jobs_run_inline() {
        let pool = Pool::shared(2).unwrap();
        let total = AtomicUsize::new(0);
        pool.run(4, &|_| {
            pool.run(3, &|_| {
                total.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(total.load(Ordering::Relaxed), 12);
        let total = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..100 {
                        pool.run(8, &|_| {
                            total.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                });
            }
        });
        assert_eq!(total.load(Ordering::Relaxed), 4 * 100 * 8);
    }

    #[test]
    fn a_task_panic_reaches_the_caller_and_the_pool_goes_on() {
        let pool = Pool::new(2).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            pool.run(10, &|i| assert!(i != 7, "task seven"));
        }));
        assert!(r.is_err());
        assert_eq!(tasks_run(&pool, 10), 10);
    }

    #[test]
    fn shared_pools_are_one_per_thread_count() {
        let a = Pool::shared(3).unwrap();
        let b = Pool::shared(3).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(Pool::shared(4).unwrap().threads(), 4);
    }
}
