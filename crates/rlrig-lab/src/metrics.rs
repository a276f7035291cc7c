//! A Prometheus text-format endpoint for a run in progress (`--metrics-addr`).
//! One small thread, HTTP/1.1 with `Connection: close`, loopback unless the user
//! names another address.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Serves the latest rendered metrics at `/metrics` until dropped.
pub struct MetricsServer {
    body: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    handle: Option<JoinHandle<()>>,
}

/// `PORT` or `:PORT` alone binds to loopback; `HOST:PORT` binds where told.
pub fn parse_addr(s: &str) -> Result<SocketAddr, crate::LabError> {
    let s = s.trim();
    let full = if let Some(port) = s.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else if s.chars().all(|c| c.is_ascii_digit()) && !s.is_empty() {
        format!("127.0.0.1:{s}")
    } else {
        s.to_string()
    };
    let bad = |why: String| crate::LabError::Address {
        addr: s.into(),
        why,
    };
    full.to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("no address".into()))
}

fn serve(mut stream: TcpStream, body: &Mutex<String>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    // Drain the headers (bounded: at most 100 lines).
    for _ in 0..100 {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) if line == "\r\n" || line == "\n" => break,
            Ok(_) => {}
        }
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/");
    let (status, text) = if path == "/metrics" || path == "/" {
        ("200 OK", body.lock().map(|b| b.clone()).unwrap_or_default())
    } else {
        ("404 Not Found", "not found: try /metrics\n".to_string())
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
}

impl MetricsServer {
    pub fn start(addr: SocketAddr) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let body = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (b, st) = (Arc::clone(&body), Arc::clone(&stop));
        let handle = std::thread::Builder::new()
            .name("rlrig-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if st.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Ok(s) = conn {
                        serve(s, &b);
                    }
                }
            })?;
        Ok(MetricsServer {
            body,
            stop,
            addr,
            handle: Some(handle),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn update(&self, text: String) {
        if let Ok(mut b) = self.body.lock() {
            *b = text;
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Builds Prometheus text exposition: `# HELP`, `# TYPE`, then samples.
#[derive(Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    pub fn metric(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: &[(&str, f64)],
    ) -> &mut Self {
        self.text += &format!("# HELP {name} {help}\n# TYPE {name} {kind}\n");
        for (labels, v) in samples {
            if v.is_finite() {
                if labels.is_empty() {
                    self.text += &format!("{name} {v}\n");
                } else {
                    self.text += &format!("{name}{{{labels}}} {v}\n");
                }
            }
        }
        self
    }

    pub fn finish(self) -> String {
        self.text
    }
}

/// This process's resident memory in bytes (Linux), if known.
pub fn rss_bytes() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = s
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024.0)
}

/// The Prometheus text for one progress update of a PPO run: steps, iterations, rate,
/// return, losses, stage times, CPU and pool use, GPU use, memory.
pub fn training(
    labels: &str,
    p: &rlrig_learn::driver::Report<'_, rlrig_learn::ppo::Ppo>,
    cpu: &crate::verdict::CpuSampler,
    gpus: &[crate::probe::GpuReading],
) -> String {
    let mut e = Exposition::default();
    let s = p.stats;
    e.metric(
        "rlrig_steps_total",
        "counter",
        "Environment steps taken.",
        &[(labels, s.global_step as f64)],
    )
    .metric(
        "rlrig_iterations_total",
        "counter",
        "Rollout+update iterations.",
        &[(labels, s.iteration as f64)],
    )
    .metric(
        "rlrig_steps_per_second",
        "gauge",
        "Environment steps per second over the last iteration.",
        &[(labels, p.rate)],
    )
    .metric(
        "rlrig_episode_return",
        "gauge",
        "Mean return of recently finished episodes.",
        &[(labels, p.recent_return)],
    )
    .metric(
        "rlrig_policy_loss",
        "gauge",
        "PPO surrogate loss of the last update.",
        &[(labels, s.policy_loss)],
    )
    .metric(
        "rlrig_value_loss",
        "gauge",
        "Value loss of the last update.",
        &[(labels, s.value_loss)],
    );
    let (env, inf, learn) = (
        format!("{labels},stage=\"env\""),
        format!("{labels},stage=\"inference\""),
        format!("{labels},stage=\"learner\""),
    );
    e.metric(
        "rlrig_stage_seconds_total",
        "counter",
        "Wall time spent per stage.",
        &[
            (&env, p.alg.times.env),
            (&inf, p.alg.times.inference),
            (&learn, p.alg.times.learner),
        ],
    );
    let busy = cpu.busy();
    let cores: Vec<String> = (0..busy.len()).map(|i| format!("core=\"{i}\"")).collect();
    let samples: Vec<(&str, f64)> = cores.iter().map(String::as_str).zip(busy).collect();
    e.metric(
        "rlrig_cpu_busy_ratio",
        "gauge",
        "Busy fraction of each core since the run started.",
        &samples,
    );
    // Work done in the worker pool (a spinning worker is busy to the OS, not here).
    let tasks = cpu.pool_tasks();
    let threads: Vec<String> = (0..tasks.len())
        .map(|i| match i {
            0 => format!("{labels},thread=\"caller\""),
            i => format!("{labels},thread=\"worker{}\"", i - 1),
        })
        .collect();
    let samples: Vec<(&str, f64)> = threads.iter().map(String::as_str).zip(tasks).collect();
    e.metric(
        "rlrig_pool_task_seconds_total",
        "counter",
        "Seconds spent in worker-pool tasks per thread (env stepping and learner chunks).",
        &samples,
    );
    if !gpus.is_empty() {
        let names: Vec<String> = gpus
            .iter()
            .map(|(g, _, _)| format!("gpu=\"{g}\""))
            .collect();
        let samples: Vec<(&str, f64)> = names
            .iter()
            .map(String::as_str)
            .zip(gpus.iter().map(|(_, b, _)| b / 100.0))
            .collect();
        e.metric(
            "rlrig_gpu_busy_ratio",
            "gauge",
            "GPU busy fraction (NVML, amdgpu sysfs).",
            &samples,
        );
        let mem: Vec<(&str, f64)> = names
            .iter()
            .map(String::as_str)
            .zip(
                gpus.iter()
                    .map(|(_, _, m)| m.map_or(f64::NAN, |m| m * 1024.0 * 1024.0)),
            )
            .collect();
        e.metric(
            "rlrig_gpu_memory_used_bytes",
            "gauge",
            "GPU memory in use.",
            &mem,
        );
    }
    if let Some(rss) = rss_bytes() {
        e.metric(
            "rlrig_resident_memory_bytes",
            "gauge",
            "Resident memory of this process.",
            &[("", rss)],
        );
    }
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn bare_ports_bind_to_loopback() {
        assert_eq!(parse_addr("9100").unwrap().to_string(), "127.0.0.1:9100");
        assert_eq!(parse_addr(":9100").unwrap().to_string(), "127.0.0.1:9100");
        assert_eq!(parse_addr("127.0.0.1:0").unwrap().port(), 0);
        assert!(parse_addr("not an address").is_err());
    }

    #[test]
    fn serves_the_latest_exposition_over_loopback() {
        let server = MetricsServer::start(parse_addr("127.0.0.1:0").unwrap()).unwrap();
        let mut e = Exposition::default();
        e.metric(
            "rlrig_steps_total",
            "counter",
            "Environment steps.",
            &[("env=\"CartPole-v1\"", 42.0)],
        );
        server.update(e.finish());
        let get = |path: &str| {
            let mut s = TcpStream::connect(server.local_addr()).unwrap();
            write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            out
        };
        let r = get("/metrics");
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        assert!(r.contains("# TYPE rlrig_steps_total counter"));
        assert!(r.contains("rlrig_steps_total{env=\"CartPole-v1\"} 42"));
        assert!(get("/other").starts_with("HTTP/1.1 404"));
    }
}
