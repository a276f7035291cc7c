//! Stopping a run early and keeping its work: a request to stop (Ctrl-C, SIGTERM from a
//! batch scheduler, or a caller such as the Python package), shared between whoever
//! asks and the run driver, which finishes the iteration in progress, writes a
//! checkpoint and returns a summary that says it was stopped.
//!
//! The flag only records the request; installing signal handlers is the binary's job
//! (`rlrig` uses `signal-hook`, which stores the signal number into
//! [`StopFlag::signal_slot`] from its handler: an atomic store, async-signal-safe).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Why a run stopped before its budget was spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (`kill`, a batch scheduler, `mpirun` passing on a stop).
    Terminate,
}

/// SIGINT and SIGTERM's numbers, the same on every Unix rlrig runs on.
const SIGINT: usize = 2;
const SIGTERM: usize = 15;

impl Stop {
    /// The signal's name, for messages.
    pub fn signal_name(self) -> &'static str {
        match self {
            Stop::Interrupt => "SIGINT",
            Stop::Terminate => "SIGTERM",
        }
    }

    /// The signal's number.
    pub fn signal(self) -> usize {
        match self {
            Stop::Interrupt => SIGINT,
            Stop::Terminate => SIGTERM,
        }
    }

    /// The shell's convention for a process ended by this signal: 128 + its number
    /// (130 for SIGINT, 143 for SIGTERM).
    pub fn exit_code(self) -> u8 {
        128 + self.signal() as u8
    }

    /// The stop a signal number asks for (`None` for 0 and any other signal).
    pub fn from_signal(sig: usize) -> Option<Stop> {
        match sig {
            SIGINT => Some(Stop::Interrupt),
            SIGTERM => Some(Stop::Terminate),
            _ => None,
        }
    }
}

/// A request to stop a run, cheap to clone and to poll (one relaxed atomic load per
/// iteration). The default flag is never raised unless someone calls
/// [`StopFlag::request`] or stores into its [`StopFlag::signal_slot`].
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Arc<AtomicUsize>);

impl StopFlag {
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// Asks the run to stop (the first request wins; later ones change nothing).
    pub fn request(&self, why: Stop) {
        let _ = self
            .0
            .compare_exchange(0, why.signal(), Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Whether a stop was asked for, and why.
    pub fn requested(&self) -> Option<Stop> {
        Stop::from_signal(self.0.load(Ordering::Relaxed))
    }

    /// The cell a signal handler stores the signal number into.
    pub fn signal_slot(&self) -> &Arc<AtomicUsize> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_request_wins_and_clones_share_it() {
        let f = StopFlag::new();
        assert_eq!(f.requested(), None);
        let g = f.clone();
        g.request(Stop::Terminate);
        f.request(Stop::Interrupt);
        assert_eq!(f.requested(), Some(Stop::Terminate));
        assert_eq!(f.requested().map(Stop::exit_code), Some(143));
        assert_eq!(Stop::Interrupt.exit_code(), 130);
    }

    #[test]
    fn a_signal_number_in_the_slot_is_a_request() {
        let f = StopFlag::new();
        f.signal_slot().store(2, Ordering::SeqCst);
        assert_eq!(f.requested(), Some(Stop::Interrupt));
        f.signal_slot().store(10, Ordering::SeqCst);
        assert_eq!(f.requested(), None, "other signals are not stops");
    }
}
