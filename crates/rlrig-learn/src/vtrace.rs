//! V-trace (Espeholt et al. 2018, "IMPALA", section 4.1): off-policy corrected value
//! targets and policy-gradient advantages for trajectories collected by a behaviour
//! policy `mu` that lags the learner's policy `pi`.
//!
//! For one env's trajectory `x_0 .. x_T` with per-step discounts `g_t` (gamma, or 0 where
//! the episode ended at step t):
//!
//! ```text
//! rho_t = min(rho_bar, pi_t / mu_t)        c_t = lambda * min(c_bar, pi_t / mu_t)
//! delta_t = rho_t * (r_t + g_t * V(x_{t+1}) - V(x_t))
//! v_t = V(x_t) + delta_t + g_t * c_t * (v_{t+1} - V(x_{t+1}))      (v_T = V(x_T))
//! A_t = rho_t * (r_t + g_t * v_{t+1} - V(x_t))                       (policy gradient)
//! ```
//!
//! On-policy (`pi = mu`) with `rho_bar, c_bar >= 1` and `lambda = 1`, `v_t` is the
//! n-step bootstrapped return, as A2C uses.

/// Truncation levels and the trace-cutting lambda.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VtraceParams {
    pub gamma: f32,
    pub lambda: f32,
    pub rho_bar: f32,
    pub c_bar: f32,
}

/// V-trace over `t_max` steps of `e` envs, time-major (`[t * e + k]`).
///
/// `log_rhos` are `log pi(a_t|x_t) - log mu(a_t|x_t)`; `discounts[t * e + k]` is 1 if
/// step `t` did not end env `k`'s episode (multiplied by `gamma` inside); `values` are
/// `V(x_t)` under the learner's current parameters and `bootstrap[k] = V(x_T)`. Writes
/// the value targets `v_t` into `vs` and the policy-gradient advantages into `pg_adv`.
#[allow(clippy::too_many_arguments)]
pub fn vtrace(
    t_max: usize,
    e: usize,
    p: VtraceParams,
    log_rhos: &[f32],
    rewards: &[f32],
    discounts: &[f32],
    values: &[f32],
    bootstrap: &[f32],
    vs: &mut [f32],
    pg_adv: &mut [f32],
) {
    let n = t_max * e;
    for (name, len) in [
        ("log_rhos", log_rhos.len()),
        ("rewards", rewards.len()),
        ("discounts", discounts.len()),
        ("values", values.len()),
        ("vs", vs.len()),
        ("pg_adv", pg_adv.len()),
    ] {
        assert_eq!(len, n, "vtrace: {name} must hold t_max * e = {n} values");
    }
    assert_eq!(bootstrap.len(), e, "vtrace: bootstrap must hold e values");
    for k in 0..e {
        // acc = v_{t+1} - V(x_{t+1}), zero past the end (v_T = V(x_T)).
        let mut acc = 0.0f32;
        for t in (0..t_max).rev() {
            let i = t * e + k;
            let ratio = log_rhos[i].exp();
            let rho = ratio.min(p.rho_bar);
            let c = p.lambda * ratio.min(p.c_bar);
            let g = p.gamma * discounts[i];
            let next_v = if t + 1 == t_max {
                bootstrap[k]
            } else {
                values[i + e]
            };
            let next_vs = next_v + acc;
            let delta = rho * (rewards[i] + g * next_v - values[i]);
            pg_adv[i] = rho * (rewards[i] + g * next_vs - values[i]);
            acc = delta + g * c * acc;
            vs[i] = values[i] + acc;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: VtraceParams = VtraceParams {
        gamma: 0.9,
        lambda: 1.0,
        rho_bar: 1.0,
        c_bar: 1.0,
    };

    /// On-policy, V-trace's targets are the n-step returns bootstrapped from V(x_T),
    /// cut at episode ends; the advantages are those returns minus V.
    #[test]
    fn on_policy_targets_are_n_step_returns() {
        let (t_max, e) = (4, 2);
        let rewards = [1.0, 0.5, -1.0, 2.0, 0.0, 1.0, 3.0, -0.5];
        // Env 1's episode ends at step 1 (time-major: index 1 * 2 + 1).
        let discounts = [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0];
        let values = [0.3, -0.2, 0.1, 0.4, 0.7, 0.0, -0.6, 0.9];
        let bootstrap = [1.5, -1.0];
        let (mut vs, mut adv) = ([0.0; 8], [0.0; 8]);
        vtrace(
            t_max, e, ON, &[0.0; 8], &rewards, &discounts, &values, &bootstrap, &mut vs, &mut adv,
        );
        for k in 0..e {
            let mut ret = bootstrap[k];
            for t in (0..t_max).rev() {
                let i = t * e + k;
                let next = ret;
                ret = rewards[i] + 0.9 * discounts[i] * ret;
                assert!((vs[i] - ret).abs() < 1e-5, "v[{t},{k}] {} vs {ret}", vs[i]);
                let a = rewards[i] + 0.9 * discounts[i] * next - values[i];
                assert!((adv[i] - a).abs() < 1e-5, "A[{t},{k}] {} vs {a}", adv[i]);
            }
        }
    }

    /// Two steps, one env, off-policy, worked by hand: ratios 2 (clipped to 1) and 0.5.
    #[test]
    fn off_policy_two_steps_by_hand() {
        let p = VtraceParams {
            gamma: 0.5,
            lambda: 1.0,
            rho_bar: 1.0,
            c_bar: 1.0,
        };
        let log_rhos = [2.0f32.ln(), 0.5f32.ln()];
        let (rewards, values, bootstrap) = ([1.0, 2.0], [0.5, 1.0], [4.0]);
        let (mut vs, mut adv) = ([0.0; 2], [0.0; 2]);
        vtrace(
            2,
            1,
            p,
            &log_rhos,
            &rewards,
            &[1.0, 1.0],
            &values,
            &bootstrap,
            &mut vs,
            &mut adv,
        );
        // t = 1: rho = c = 0.5; delta = 0.5 * (2 + 0.5 * 4 - 1) = 1.5; v_1 = 1 + 1.5 = 2.5;
        //        A_1 = 0.5 * (2 + 0.5 * 4 - 1) = 1.5.
        // t = 0: rho = c = 1; delta = 1 + 0.5 * 1 - 0.5 = 1.0;
        //        v_0 = 0.5 + 1.0 + 0.5 * 1 * (2.5 - 1) = 2.25; A_0 = 1 + 0.5 * 2.5 - 0.5 = 1.75.
        let want_vs = [2.25, 2.5];
        let want_adv = [1.75, 1.5];
        for i in 0..2 {
            assert!((vs[i] - want_vs[i]).abs() < 1e-6, "v_{i}: {}", vs[i]);
            assert!((adv[i] - want_adv[i]).abs() < 1e-6, "A_{i}: {}", adv[i]);
        }
    }

    /// lambda = 0 cuts every trace: v_t is the one-step corrected target.
    #[test]
    fn lambda_zero_is_one_step() {
        let p = VtraceParams { lambda: 0.0, ..ON };
        let (rewards, values) = ([1.0, 1.0, 1.0], [0.2, 0.4, 0.6]);
        let log_rhos = [0.3f32.ln(), 0.0, 5.0f32.ln()];
        let (mut vs, mut adv) = ([0.0; 3], [0.0; 3]);
        vtrace(
            3,
            1,
            p,
            &log_rhos,
            &rewards,
            &[1.0; 3],
            &values,
            &[2.0],
            &mut vs,
            &mut adv,
        );
        let next = [0.4, 0.6, 2.0];
        let rho = [0.3, 1.0, 1.0];
        for t in 0..3 {
            let want = values[t] + rho[t] * (rewards[t] + 0.9 * next[t] - values[t]);
            assert!((vs[t] - want).abs() < 1e-6, "v_{t}: {} vs {want}", vs[t]);
        }
    }
}
