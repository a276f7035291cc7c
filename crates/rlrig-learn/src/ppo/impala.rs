//! IMPALA on PPO's machinery: asynchronous actor threads that collect with whatever
//! parameters were newest (optionally through the batching inference server), and the
//! learner's V-trace targets for rollouts of an older policy.

use super::*;

impl Ppo {
    /// Starts the asynchronous actors: actor 0 on the home envs, the others on theirs.
    pub(super) fn start_actors(&mut self) {
        let cfg = self.cfg.clone();
        let version = self.iteration;
        let latest: Published = std::sync::Arc::new(std::sync::Mutex::new((
            version,
            std::sync::Arc::new(self.agent.params.clone()),
        )));
        // A rendezvous queue: a finished rollout waits in its actor until the learner takes
        // it, so rollouts are about `actors` updates stale; a buffer would only add to that.
        let (tx, rx) = std::sync::mpsc::sync_channel(0);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let origin = self.trace.as_ref().map(SpanLog::origin);
        let Collection::Async { actors, server } = cfg.collection() else {
            unreachable!("start_actors runs for asynchronous collection only")
        };
        let server = server.then(|| {
            let policy = PublishedPolicy {
                agent: self.agent.shapes(),
                latest: latest.clone(),
                cache: NetCache::default(),
                out: Vec::new(),
            };
            let out = self.agent.policy_dim();
            crate::serve::InferenceServer::start(
                policy,
                self.agent.obs_dim,
                out,
                actors * cfg.num_envs,
            )
        });
        let home = self
            .actor
            .take()
            .expect("the actor side is home between calls");
        let sides = std::iter::once(home).chain(self.parked.drain(..));
        let handles = sides
            .enumerate()
            .map(|(j, act)| {
                let (cfg, latest, tx, stop) =
                    (cfg.clone(), latest.clone(), tx.clone(), stop.clone());
                let agent = self.agent.shapes();
                let base = self.async_base;
                let client = server.as_ref().map(|s| s.client());
                std::thread::spawn(move || {
                    run_actor(cfg, agent, act, j, base, latest, tx, stop, origin, client)
                })
            })
            .collect();
        self.pool = Some(AsyncActors {
            latest,
            server,
            rx,
            stop,
            handles,
            version,
        });
    }

    /// Stops the asynchronous actors and brings their envs home. Rollouts in flight are
    /// dropped (their steps are not counted).
    pub(super) fn stop_actors(&mut self) {
        let Some(pool) = self.pool.take() else {
            return;
        };
        pool.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        // Hanging up wakes actors blocked on a full queue.
        drop(pool.rx);
        let mut most = 0;
        for (j, h) in pool.handles.into_iter().enumerate() {
            match h.join() {
                Ok((act, rounds)) => {
                    most = most.max(rounds);
                    if j == 0 {
                        self.actor = Some(act);
                    } else {
                        self.parked.push(act);
                    }
                }
                // Re-raise an actor's panic (a bug) unless already unwinding.
                Err(p) if !std::thread::panicking() => std::panic::resume_unwind(p),
                Err(_) => {}
            }
        }
        self.async_base += (most + 1) * self.cfg.collection().actor_threads() as u64;
        // Every client went with its actor: the server can stop.
        if let Some(server) = pool.server {
            let s = server.shutdown();
            self.server_stats.calls += s.calls;
            self.server_stats.rows += s.rows;
            self.server_stats.requests += s.requests;
        }
    }

    /// One update of asynchronous IMPALA: the next rollout any actor finished, V-trace
    /// targets and the update with the current parameters, which are then published.
    pub(super) fn iterate_async(&mut self, keep_running: bool) -> IterationStats {
        let cfg = self.cfg.clone();
        let e = cfg.num_envs;
        let (it, lr, mut stats) = self.begin_iteration();
        if self.pool.is_none() {
            self.start_actors();
        }
        let pool = self.pool.as_ref().expect("just started");
        let r = pool.rx.recv().expect("actors run until stopped");
        self.async_lag.0 += pool.version - r.version;
        self.async_lag.1 += 1;
        self.buf = r.buf;
        self.absorb(&r.stats);
        stats.episodes = r.stats.episodes;

        let t_learn = std::time::Instant::now();
        self.learn_next_done = r.next_done;
        let mut next_value = Vec::new();
        self.agent.head_on(
            Part::Value,
            &mut *self.backend,
            &r.next_obs,
            e,
            &mut next_value,
        );
        self.vtrace_targets(&next_value);
        self.update(lr, it, &mut stats);
        let pool = self.pool.as_mut().expect("running");
        pool.version += 1;
        *pool.latest.lock().expect("actors do not panic holding it") =
            (pool.version, std::sync::Arc::new(self.agent.params.clone()));
        if !keep_running || it >= cfg.num_iterations() {
            self.stop_actors();
        }
        let t_end = std::time::Instant::now();
        self.times.learner += (t_end - t_learn).as_secs_f64();
        self.span("learner", t_learn, t_end);
        self.finish_stats(stats, r.stats.ret_sum, r.stats.len_sum)
    }

    /// IMPALA's learner side: values and log-probabilities of the rollout under the
    /// current parameters, V-trace targets (into `returns`) and advantages (into
    /// `advantages`). The stored log-probabilities become the current ones, so the
    /// update's ratio starts at 1 and its gradient is V-trace's `A_t * grad log pi`.
    pub(super) fn vtrace_targets(&mut self, next_value: &[f32]) {
        let cfg = &self.cfg;
        let (t_max, e) = (cfg.num_steps, cfg.num_envs);
        let n = t_max * e;
        let adim = self.agent.action_dim();
        let mut bufs = std::mem::take(&mut self.update_bufs);
        let out = &mut bufs.rollout_out;
        out.clear();
        out.resize(n * self.agent.policy_dim(), 0.0);
        self.agent.forward(
            &mut *self.backend,
            &self.buf.obs,
            n,
            false,
            out,
            &mut self.buf.values,
        );
        let ls = &mut bufs.ls;
        ls.clear();
        ls.extend_from_slice(self.backend.free_params());
        let logp_row = &mut bufs.logp_row;
        logp_row.clear();
        logp_row.resize(self.agent.policy_dim(), 0.0);
        let log_rhos = &mut bufs.log_rhos;
        log_rhos.clear();
        log_rhos.resize(n, 0.0);
        for i in 0..n {
            let new_lp = match &self.agent.head {
                Head::Categorical { n: k } => {
                    log_softmax(&out[i * k..(i + 1) * k], logp_row);
                    logp_row[self.buf.actions[i] as usize]
                }
                Head::Gaussian { dim, .. } => (0..*dim)
                    .map(|j| {
                        let z = (self.buf.actions[i * adim + j] - out[i * dim + j]) / ls[j].exp();
                        gaussian_log_density(z, ls[j])
                    })
                    .sum(),
            };
            log_rhos[i] = new_lp - self.buf.logprobs[i];
            self.buf.logprobs[i] = new_lp;
        }
        self.discounts_into(&mut bufs.discounts);
        crate::vtrace::vtrace(
            t_max,
            e,
            crate::vtrace::VtraceParams {
                gamma: cfg.gamma as f32,
                lambda: cfg.gae_lambda as f32,
                rho_bar: cfg.vtrace_rho_bar as f32,
                c_bar: cfg.vtrace_c_bar as f32,
            },
            &bufs.log_rhos,
            &self.buf.rewards,
            &bufs.discounts,
            &self.buf.values,
            next_value,
            &mut self.returns,
            &mut self.advantages,
        );
        self.update_bufs = bufs;
    }
}
