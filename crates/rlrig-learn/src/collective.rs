//! Several processes (MPI ranks) working on one run. The learners stay deterministic:
//! work is split by a rule that depends on the run's shape and the rank count only,
//! and what the ranks computed is gathered whole, so that every rank adds it up in the
//! same fixed order as a single process would. Results equal a one-process run's, bit
//! for bit, with any number of ranks.
//!
//! ES/GA split each generation's members over the ranks
//! ([`crate::evolution::Evolution::set_collective`]); PPO, A2C, IMPALA (synchronous),
//! DQN and DDPG/TD3/SAC split each training pass's row chunks
//! ([`crate::backend::Native::collective`]), and PPO and A2C their envs
//! ([`crate::rank_envs::RankEnvs`]).

use crate::stop::Stop;

pub use rlrig_nn::collective::{Collective, LocalRanks};

/// The stop every rank agrees on, given this rank's: the first stop any rank got (by
/// signal number, the same on every rank), so that all ranks stop after the same
/// iteration and checkpoint the same state. A collective call.
pub fn agree_stop(c: &dyn Collective, local: Option<Stop>) -> Option<Stop> {
    let mine = local.map_or(0.0, |s| s.signal() as f64);
    c.allgather(&[mine])
        .into_iter()
        .filter(|&x| x > 0.0)
        .map(|x| x as usize)
        .min()
        .and_then(Stop::from_signal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_stop_any_rank_got_is_everyones() {
        let stops = [None, Some(Stop::Terminate), Some(Stop::Interrupt)];
        let got = LocalRanks::run(3, |c| agree_stop(&c, stops[c.rank()]));
        let want = [Stop::Terminate, Stop::Interrupt]
            .into_iter()
            .min_by_key(|s| s.signal());
        for g in got {
            assert_eq!(g, want);
        }
    }
}
