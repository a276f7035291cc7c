//! A batching inference server: callers on any thread (actor threads, each searching
//! its own batch of games) submit small forward requests; one server thread gathers
//! whatever has arrived, up to `max_rows`, into a single network call and answers each
//! caller with its rows.
//!
//! Not bit-reproducible as a whole: which requests share a call depends on timing, and
//! the network's rounding may depend on the batch shape. Lock-step search in one thread
//! ([`crate::mcts::BatchedMcts`] with the network as its evaluator) is the
//! deterministic path; the server is for throughput when several threads search.

use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

use crate::backend::Evaluator;

struct Request {
    obs: Vec<f32>,
    rows: usize,
    reply: SyncSender<(Vec<f32>, Vec<f32>)>,
}

/// Serves an [`Evaluator`] from its own thread.
pub struct InferenceServer {
    tx: Option<Sender<Request>>,
    handle: Option<JoinHandle<ServerStats>>,
    obs_dim: usize,
    actions: usize,
}

/// What the server did, returned by [`InferenceServer::shutdown`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerStats {
    pub calls: u64,
    pub rows: u64,
    pub requests: u64,
}

impl ServerStats {
    /// Mean rows per network call.
    pub fn mean_batch(&self) -> f64 {
        self.rows as f64 / self.calls.max(1) as f64
    }
}

/// A handle for one caller; cheap to clone, one per thread.
#[derive(Clone)]
pub struct Client {
    tx: Sender<Request>,
    obs_dim: usize,
    actions: usize,
}

impl InferenceServer {
    /// Starts the server thread. `eval` answers batches of `obs_dim`-wide rows with
    /// `actions` logits and one value per row; a call takes at most `max_rows` rows
    /// (requests are never split, so one larger request is served alone).
    pub fn start<E: Evaluator + Send + 'static>(
        mut eval: E,
        obs_dim: usize,
        actions: usize,
        max_rows: usize,
    ) -> InferenceServer {
        let (tx, rx): (Sender<Request>, Receiver<Request>) = channel();
        let handle = std::thread::Builder::new()
            .name("rlrig-inference".into())
            .spawn(move || {
                let mut stats = ServerStats::default();
                let (mut obs, mut logits, mut values) = (Vec::new(), Vec::new(), Vec::new());
                let mut batch: Vec<Request> = Vec::new();
                // Block for the first request, then take whatever else is waiting.
                while let Ok(first) = rx.recv() {
                    let mut rows = first.rows;
                    batch.push(first);
                    while rows < max_rows {
                        match rx.try_recv() {
                            Ok(r) => {
                                rows += r.rows;
                                batch.push(r);
                            }
                            Err(_) => break,
                        }
                    }
                    obs.clear();
                    for r in &batch {
                        obs.extend_from_slice(&r.obs);
                    }
                    logits.resize(rows * actions, 0.0);
                    values.resize(rows, 0.0);
                    eval.evaluate(&obs, rows, &mut logits, &mut values);
                    stats.calls += 1;
                    stats.rows += rows as u64;
                    stats.requests += batch.len() as u64;
                    let mut at = 0;
                    for r in batch.drain(..) {
                        let l = logits[at * actions..(at + r.rows) * actions].to_vec();
                        let v = values[at..at + r.rows].to_vec();
                        at += r.rows;
                        // A caller that went away no longer needs its answer.
                        let _ = r.reply.send((l, v));
                    }
                }
                stats
            })
            .expect("spawning the inference thread");
        InferenceServer {
            tx: Some(tx),
            handle: Some(handle),
            obs_dim,
            actions,
        }
    }

    pub fn client(&self) -> Client {
        Client {
            tx: self.tx.clone().expect("server running"),
            obs_dim: self.obs_dim,
            actions: self.actions,
        }
    }

    /// Stops the server once every client is dropped; returns its statistics.
    pub fn shutdown(mut self) -> ServerStats {
        drop(self.tx.take());
        self.handle
            .take()
            .expect("server running")
            .join()
            .expect("the inference thread does not panic")
    }
}

impl Evaluator for Client {
    fn evaluate(&mut self, obs: &[f32], n: usize, logits: &mut [f32], values: &mut [f32]) {
        assert_eq!(
            obs.len(),
            n * self.obs_dim,
            "inference request: observation shape"
        );
        let (reply, answer) = sync_channel(1);
        self.tx
            .send(Request {
                obs: obs.to_vec(),
                rows: n,
                reply,
            })
            .expect("the inference server is running");
        let (l, v) = answer.recv().expect("the inference server answers");
        logits[..n * self.actions].copy_from_slice(&l);
        values[..n].copy_from_slice(&v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alphazero::PolicyValue;
    use rlrig_env::{Purpose, Rng};

    /// Many threads through one server get the same answers as calling the network
    /// directly (to rounding: the server's batches have other shapes), and the server
    /// merges their requests into fewer calls.
    #[test]
    fn threads_share_batched_calls_and_get_their_own_rows() {
        let net = PolicyValue::new(84, 7, &[32, 32], &mut Rng::stream(1, Purpose::Init, 0));
        let server = InferenceServer::start(net.clone().into_evaluator(), 84, 7, 256);
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let mut c = server.client();
                let net = net.clone();
                std::thread::spawn(move || {
                    let mut rng = Rng::stream(2, Purpose::User, t);
                    let mut direct = net.evaluator();
                    for _ in 0..50 {
                        let n = 1 + rng.below(8) as usize;
                        let obs: Vec<f32> = (0..n * 84).map(|_| rng.below(2) as f32).collect();
                        let (mut l1, mut v1) = (vec![0.0; n * 7], vec![0.0; n]);
                        let (mut l2, mut v2) = (vec![0.0; n * 7], vec![0.0; n]);
                        c.evaluate(&obs, n, &mut l1, &mut v1);
                        direct.evaluate(&obs, n, &mut l2, &mut v2);
                        for (a, b) in l1.iter().zip(&l2).chain(v1.iter().zip(&v2)) {
                            // Relative: merged batches may take the GEMM path.
                            assert!((a - b).abs() < 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let stats = server.shutdown();
        assert_eq!(stats.requests, 200);
        assert!(stats.calls <= stats.requests);
        assert!(stats.rows >= 200);
    }
}
