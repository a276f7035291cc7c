//! ES/GA unit tests.

use super::*;

#[test]
fn centered_ranks_span_minus_half_to_half() {
    assert_eq!(centered_ranks(&[3.0, 1.0, 2.0]), vec![0.5, -0.5, 0.0]);
    let r = centered_ranks(&[5.0; 4]);
    assert_eq!(r, vec![-0.5, -0.5 + 1.0 / 3.0, -0.5 + 2.0 / 3.0, 0.5]);
}

#[test]
fn episode_seeds_differ_per_member_and_generation() {
    let s: std::collections::HashSet<u64> = (0..50)
        .flat_map(|g| (0..50).map(move |m| episode_seed(1, g, m)))
        .collect();
    assert_eq!(s.len(), 2500);
}

#[test]
fn bad_configs_are_refused() {
    let mut c = EvoConfig::for_env(Method::Es, "CartPole-v1");
    c.population = 7;
    crate::rules::assert_refused(c.validate(), "even");
    let mut c = EvoConfig::for_env(Method::Ga, "CartPole-v1");
    c.population = 4;
    c.truncation = 4;
    c.elite_candidates = 5;
    crate::rules::assert_refused(c.validate(), "smaller than the elite");
    let mut c = EvoConfig::for_env(Method::Es, "CartPole-v1");
    c.prune = true;
    crate::rules::assert_refused(c.validate(), "GA option");
}

/// The same run with 1 and 2 threads gives identical statistics and parameters,
/// for ES, GA and the pruning GA.
#[test]
fn thread_count_does_not_change_results() {
    for (method, prune) in [(Method::Es, false), (Method::Ga, false), (Method::Ga, true)] {
        let cfg = EvoConfig {
            generations: 3,
            population: 12,
            truncation: 4,
            elite_candidates: 2,
            elite_episodes: 2,
            prune,
            ..EvoConfig::for_env(method, "CartPole-v1")
        };
        let run = |threads| {
            let mut e = Evolution::new(cfg.clone(), threads).unwrap();
            let stats: Vec<GenStats> = (0..3).map(|_| e.step()).collect();
            (format!("{stats:?}"), e.best_params())
        };
        assert_eq!(run(1), run(2), "{method:?} prune {prune}");
    }
}

#[test]
fn pruning_removes_connections_but_never_biases() {
    let cfg = EvoConfig {
        generations: 2,
        population: 8,
        truncation: 4,
        elite_candidates: 2,
        prune: true,
        prune_fraction: 0.3,
        ..EvoConfig::for_env(Method::Ga, "CartPole-v1")
    };
    let mut e = Evolution::new(cfg, 1).unwrap();
    e.step();
    e.step();
    let n = e.policy.num_params();
    let child = &e.population[n..2 * n];
    let removed = child.iter().filter(|&&m| m == 0.0).count();
    assert!(removed > 0);
    for (j, m) in child.iter().enumerate() {
        assert!(*m == 0.0 || *m == 1.0);
        if e.policy.is_bias(j) {
            assert_eq!(*m, 1.0);
        }
    }
}

/// A population of 10 on CartPole, the 4 best kept (GA) and `elite_candidates` of them
/// tried for elite: small enough for a test's few generations.
fn ten_members(method: Method, elite_candidates: usize) -> EvoConfig {
    EvoConfig {
        population: 10,
        truncation: 4,
        elite_candidates,
        ..EvoConfig::for_env(method, "CartPole-v1")
    }
}

/// A run restored from its state after generation 2 continues exactly.
#[test]
fn restore_continues_bit_for_bit() {
    for method in [Method::Es, Method::Ga] {
        let cfg = ten_members(method, 2);
        let mut a = Evolution::new(cfg.clone(), 1).unwrap();
        a.step();
        a.step();
        let (st, t) = a.state();
        let map: std::collections::HashMap<&str, Vec<f32>> =
            t.into_iter().map(|(k, v)| (k, v.to_vec())).collect();
        let mut b = Evolution::new(cfg, 2).unwrap();
        b.restore(st, |k| map.get(k).cloned()).unwrap();
        for _ in 0..2 {
            assert_eq!(format!("{:?}", a.step()), format!("{:?}", b.step()));
        }
        assert_eq!(a.best_params(), b.best_params());
    }
}

/// Two "ranks" in threads, exchanging through a shared board, give the same
/// history as one process.
#[test]
fn ranks_split_members_and_agree_with_one_process() {
    for method in [Method::Es, Method::Ga] {
        let cfg = EvoConfig {
            generations: 3,
            ..ten_members(method, 3)
        };
        let run = move |c: Option<std::sync::Arc<dyn Collective>>| {
            let mut e = Evolution::new(cfg.clone(), 1).unwrap();
            if let Some(c) = c {
                e.set_collective(c);
            }
            let s: Vec<GenStats> = (0..3).map(|_| e.step()).collect();
            (format!("{s:?}"), e.best_params())
        };
        let single = run(None);
        let ranks = crate::collective::LocalRanks::run(2, |c| run(Some(std::sync::Arc::new(c))));
        for got in ranks {
            assert_eq!(got, single, "{method:?}");
        }
    }
}
