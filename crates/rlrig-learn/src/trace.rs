//! Where a run's time goes: cumulative wall time per stage ([`StageTimes`], which
//! metrics.csv, the summary's verdict and Prometheus report), and traces: spans per
//! stage, kept for the first and last iterations only, so a long run's trace stays small
//! enough for a viewer to open, written as a Chrome trace (`chrome://tracing`,
//! ui.perfetto.dev).

use std::collections::VecDeque;
use std::path::Path;
use std::time::Instant;

use crate::LearnError;
use crate::run::write_atomic;

/// Wall time per stage, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    pub env: f64,
    pub inference: f64,
    pub learner: f64,
}

impl StageTimes {
    /// The time spent per stage since the cumulative reading `before`.
    pub fn since(&self, before: &StageTimes) -> StageTimes {
        StageTimes {
            env: self.env - before.env,
            inference: self.inference - before.inference,
            learner: self.learner - before.learner,
        }
    }

    pub fn total(&self) -> f64 {
        self.env + self.inference + self.learner
    }

    /// The stages as TensorBoard scalars (`time/env`, `time/inference`, `time/learner`).
    pub fn scalars(&self) -> [(&'static str, f64); 3] {
        [
            ("time/env", self.env),
            ("time/inference", self.inference),
            ("time/learner", self.learner),
        ]
    }
}

/// One timed stage of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    pub name: &'static str,
    /// Seconds since tracing started.
    pub start: f64,
    pub dur: f64,
    /// The trace's track: 1 for the stages on the run's thread (and pool tasks that
    /// thread ran itself), `1 + i` for pool worker `i`'s tasks.
    pub tid: u32,
}

/// The track of the run's own thread.
pub const MAIN_TRACK: u32 = 1;

/// Iterations a trace keeps at each end by default (`--trace-iterations`): 2M CartPole
/// steps wrote 136 MB when every iteration was kept; 100 + 100 iterations are ~14 MB.
pub const DEFAULT_KEEP: u64 = 100;

/// The spans of the first `keep` iterations and of the last `keep`.
#[derive(Debug)]
pub struct SpanLog {
    origin: Instant,
    keep: u64,
    /// Iterations ended so far.
    iterations: u64,
    head: Vec<Span>,
    tail: VecDeque<Vec<Span>>,
    current: Vec<Span>,
}

impl SpanLog {
    /// Also records the worker pool's tasks (one track per worker) until dropped.
    pub fn new(keep: u64) -> SpanLog {
        rlrig_env::pool::record_tasks(true);
        rlrig_env::pool::take_recorded_tasks();
        SpanLog {
            origin: Instant::now(),
            keep: keep.max(1),
            iterations: 0,
            head: Vec::new(),
            tail: VecDeque::new(),
            current: Vec::new(),
        }
    }

    /// When tracing started (span times count from here).
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Records a stage of the iteration in progress.
    pub fn span(&mut self, name: &'static str, from: Instant, to: Instant) {
        self.current.push(Span {
            name,
            start: from.duration_since(self.origin).as_secs_f64(),
            dur: to.duration_since(from).as_secs_f64(),
            tid: MAIN_TRACK,
        });
    }

    /// Records spans measured elsewhere (a rollout's) in the iteration in progress.
    pub fn extend(&mut self, spans: &[Span]) {
        self.current.extend_from_slice(spans);
    }

    /// Closes the iteration in progress (with the pool tasks it ran).
    pub fn end_iteration(&mut self) {
        for (slot, t0, t1) in rlrig_env::pool::take_recorded_tasks() {
            self.current.push(Span {
                name: "pool.task",
                start: t0.saturating_duration_since(self.origin).as_secs_f64(),
                dur: t1.duration_since(t0).as_secs_f64(),
                tid: MAIN_TRACK + slot as u32,
            });
        }
        let spans = std::mem::take(&mut self.current);
        self.iterations += 1;
        if self.iterations <= self.keep {
            self.head.extend(spans);
            return;
        }
        self.tail.push_back(spans);
        if self.tail.len() as u64 > self.keep {
            self.tail.pop_front();
        }
    }

    /// Iterations left out between the kept head and tail.
    pub fn omitted(&self) -> u64 {
        self.iterations
            .saturating_sub(self.keep)
            .saturating_sub(self.tail.len() as u64)
    }

    /// The kept spans in time order (an iteration in progress included).
    pub fn spans(&self) -> impl Iterator<Item = &Span> {
        self.head
            .iter()
            .chain(self.tail.iter().flatten())
            .chain(&self.current)
    }

    /// Writes the kept spans as a Chrome trace, atomically. What was left out is said in
    /// the file: `otherData` and, where the gap is, an instant event on the timeline.
    pub fn write_chrome(&self, path: &Path) -> Result<(), LearnError> {
        let mut out = String::with_capacity(self.head.len() * 96 + 256);
        let omitted = self.omitted();
        out.push_str(&format!(
            "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"rlrig_iterations\":{},\"rlrig_kept_first\":{},\"rlrig_kept_last\":{},\"rlrig_omitted_iterations\":{omitted}}},\"traceEvents\":[",
            self.iterations,
            self.keep.min(self.iterations),
            self.tail.len(),
        ));
        let mut first = true;
        let mut event = |out: &mut String, e: String| {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&e);
        };
        let tracks = self.spans().map(|s| s.tid).max().unwrap_or(MAIN_TRACK);
        for tid in MAIN_TRACK..=tracks {
            let name = if tid == MAIN_TRACK {
                "run (stages; pool tasks it ran itself)".to_string()
            } else {
                format!("pool worker {}", tid - MAIN_TRACK - 1)
            };
            event(
                &mut out,
                format!(
                    "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"name\":\"{name}\"}}}}"
                ),
            );
        }
        for s in &self.head {
            event(&mut out, span_json(s));
        }
        if omitted > 0 {
            let at = self.head.last().map_or(0.0, |s| s.start + s.dur);
            event(
                &mut out,
                format!(
                    "{{\"name\":\"{omitted} iterations omitted (--trace-iterations {})\",\"ph\":\"i\",\"s\":\"g\",\"ts\":{:.3},\"pid\":1,\"tid\":1}}",
                    self.keep,
                    at * 1e6
                ),
            );
        }
        for s in self.tail.iter().flatten().chain(&self.current) {
            event(&mut out, span_json(s));
        }
        out.push_str("]}\n");
        write_atomic(path, out.as_bytes())
    }
}

fn span_json(s: &Span) -> String {
    let cat = s.name.split('.').next().unwrap_or(s.name);
    format!(
        "{{\"name\":\"{}\",\"cat\":\"{cat}\",\"ph\":\"X\",\"ts\":{:.3},\"dur\":{:.3},\"pid\":1,\"tid\":{}}}",
        s.name,
        s.start * 1e6,
        s.dur * 1e6,
        s.tid
    )
}

impl Drop for SpanLog {
    fn drop(&mut self) {
        rlrig_env::pool::record_tasks(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(iterations: u64, keep: u64) -> SpanLog {
        let mut log = SpanLog::new(keep);
        for _ in 0..iterations {
            let t = Instant::now();
            log.span("env.step", t, t);
            log.span("learner", t, t);
            log.end_iteration();
        }
        log
    }

    /// Stage spans (tests running beside these may add pool tasks to any trace).
    fn stages(log: &SpanLog) -> usize {
        log.spans().filter(|s| s.name != "pool.task").count()
    }

    #[test]
    fn keeps_the_first_and_last_iterations_and_counts_the_rest() {
        let log = run(1000, 10);
        assert_eq!(stages(&log), 2 * 20);
        assert_eq!(log.omitted(), 980);
        let short = run(15, 10);
        assert_eq!(stages(&short), 30);
        assert_eq!(short.omitted(), 0);
    }

    #[test]
    fn the_file_says_what_it_left_out_and_stays_bounded() {
        let dir = std::env::temp_dir().join(format!("rlrig-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (small, big) = (dir.join("a.json"), dir.join("b.json"));
        // Without pool tasks of other tests in them: stage spans only.
        let strip = |mut log: SpanLog| {
            log.head.retain(|s| s.name != "pool.task");
            log.tail
                .iter_mut()
                .for_each(|v| v.retain(|s| s.name != "pool.task"));
            log
        };
        strip(run(300, 5)).write_chrome(&small).unwrap();
        strip(run(30_000, 5)).write_chrome(&big).unwrap();
        let (a, b) = (
            std::fs::metadata(&small).unwrap().len(),
            std::fs::metadata(&big).unwrap().len(),
        );
        assert!(b < a + 200, "{a} vs {b} bytes");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&big).unwrap()).unwrap();
        assert_eq!(v["otherData"]["rlrig_omitted_iterations"], 29_990);
        let events = v["traceEvents"].as_array().unwrap();
        // One track name, 10 kept iterations of 2 spans, the note of what was left out.
        assert_eq!(events.len(), 1 + 2 * 10 + 1);
        assert_eq!(events[0]["ph"], "M");
        assert!(
            events[11]["name"]
                .as_str()
                .unwrap()
                .contains("29990 iterations omitted")
        );
        std::fs::remove_dir_all(dir).ok();
    }
}
