//! AlphaZero unit tests.

use super::*;
use crate::LearnError;

fn small() -> AzConfig {
    AzConfig {
        iterations: 3,
        games: 8,
        moves_per_iteration: 6,
        simulations: 8,
        hidden: vec![16],
        batch_size: 16,
        updates_per_iteration: 2,
        buffer_size: 64,
        eval_every: 0,
        eval_games: 2,
        eval_simulations: 4,
        ..AzConfig::default()
    }
}

/// A gate keeps the trained network only when it scores at least the threshold;
/// otherwise training resumes from the accepted weights, on the host and in the
/// backend alike.
#[test]
fn gating_accepts_or_reverts_to_the_accepted_network() {
    let (mut accepted, mut rejected) = (0, 0);
    for seed in 1..=6 {
        let cfg = AzConfig {
            seed,
            gate_every: 1,
            gate_games: 4,
            gate_threshold: 0.75,
            ..small()
        };
        let mut az = AlphaZero::new(cfg).unwrap();
        for _ in 0..3 {
            let before = az.accepted.clone();
            let st = az.iterate();
            assert!(st.gate_score.is_finite() && (0.0..=1.0).contains(&st.gate_score));
            assert_eq!(st.gate_accepted, st.gate_score >= 0.75);
            assert_eq!(az.net.params, az.accepted);
            assert_eq!(az.backend.params(), az.accepted);
            if st.gate_accepted {
                accepted += 1;
            } else {
                assert_eq!(
                    az.accepted, before,
                    "a rejected network replaced the accepted one"
                );
                rejected += 1;
            }
        }
    }
    assert!(
        accepted > 0 && rejected > 0,
        "{accepted} accepted, {rejected} rejected"
    );
    let bad = AzConfig {
        gate_threshold: 1.5,
        ..small()
    };
    crate::rules::assert_refused(bad.validate(), "gate_threshold");
}

#[test]
fn opponents_parse_with_clear_errors() {
    assert_eq!("random".parse::<Opponent>(), Ok(Opponent::Random));
    assert_eq!("solver:3".parse::<Opponent>(), Ok(Opponent::Solver(3)));
    assert!(
        "solver:x"
            .parse::<Opponent>()
            .unwrap_err()
            .contains("depth")
    );
    assert!(
        "minimax"
            .parse::<Opponent>()
            .unwrap_err()
            .contains("unknown")
    );
}

#[test]
fn outcomes_are_from_the_side_to_move() {
    // Play until a game finishes, then check each stored position's z by replaying.
    let mut az = AlphaZero::new(small()).unwrap();
    while az.buffer.is_empty() {
        az.self_play_move();
    }
    // Every stored outcome is +-1 or 0, and positions of the same game alternate.
    assert!(
        az.buffer
            .outcomes
            .iter()
            .all(|z| [1.0, -1.0, 0.0].contains(z))
    );
    let first = &az.buffer;
    let mut i = 0;
    while i + 1 < first.len() && first.states[i + 1].moves() == first.states[i].moves() + 1 {
        if first.outcomes[i] != 0.0 {
            assert_eq!(first.outcomes[i], -first.outcomes[i + 1]);
        }
        i += 1;
    }
    // Policies are distributions over legal moves.
    for (k, s) in first.states.iter().enumerate() {
        let pi = &first.policies[k * 7..(k + 1) * 7];
        assert!((pi.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        for c in 0..7 {
            if !s.can_play(c) {
                assert_eq!(pi[c], 0.0);
            }
        }
    }
}

#[test]
fn checkpoint_state_round_trips_mid_run() {
    let mut a = AlphaZero::new(small()).unwrap();
    a.iterate();
    let (st, tensors) = a.state();
    let map: std::collections::HashMap<&str, Vec<f32>> = tensors.into_iter().collect();
    let mut b = AlphaZero::new(small()).unwrap();
    b.restore(st, |k| map.get(k).cloned()).unwrap();
    while !a.done() {
        let (x, y) = (a.iterate(), b.iterate());
        assert_eq!(format!("{x:?}"), format!("{y:?}"));
    }
    assert_eq!(a.net.params, b.net.params);
    // A damaged state is refused.
    let (st, tensors) = a.state();
    let mut map: std::collections::HashMap<&str, Vec<f32>> = tensors.into_iter().collect();
    map.get_mut("slots.states").unwrap()[0] = f32::from_bits(u32::MAX);
    let mut c = AlphaZero::new(small()).unwrap();
    let e = c.restore(st, |k| map.get(k).cloned()).unwrap_err();
    assert!(matches!(e, LearnError::Mismatch(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.contains("not a Connect Four position"), "{e}");
}
