//! `rlrig probe`: CPU, caches, memory, OS, NVIDIA GPUs through NVML, AMD GPUs through
//! the amdgpu sysfs files. Reads go through a [`Roots`] so tests can point the probe
//! at fake `/sys` and `/proc` trees.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Where the probe reads the kernel's files from.
#[derive(Clone, Debug)]
pub struct Roots {
    pub sys: PathBuf,
    pub proc_: PathBuf,
    pub etc: PathBuf,
    /// Ask NVML (the NVIDIA driver's library) for GPUs.
    pub nvml: bool,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sys: "/sys".into(),
            proc_: "/proc".into(),
            etc: "/etc".into(),
            nvml: true,
        }
    }
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Cache {
    pub level: u32,
    pub kind: String,
    pub size_kib: u64,
    /// Logical CPUs sharing this cache.
    pub shared_by: usize,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Cpu {
    pub model: String,
    pub logical_cores: usize,
    pub physical_cores: usize,
    pub simd: Vec<String>,
    pub caches: Vec<Cache>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Memory {
    pub total_mib: u64,
    pub available_mib: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Os {
    pub name: String,
    pub kernel: String,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PcieLink {
    pub current: String,
    pub max: String,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NvidiaGpu {
    pub index: u32,
    pub name: String,
    pub memory_total_mib: u64,
    pub memory_used_mib: u64,
    pub driver: String,
    pub pcie: PcieLink,
    pub mig_enabled: Option<bool>,
    pub utilization_percent: Option<u32>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AmdGpu {
    pub card: String,
    pub name: String,
    pub vram_total_mib: Option<u64>,
    pub vram_used_mib: Option<u64>,
    pub busy_percent: Option<u32>,
    pub pcie: PcieLink,
}

/// A device family: either what was found, or why nothing was.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Found<T> {
    Present { devices: Vec<T> },
    Absent { reason: String },
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Probe {
    pub schema: u32,
    pub cpu: Cpu,
    pub memory: Memory,
    pub os: Os,
    pub nvidia: Found<NvidiaGpu>,
    pub amd: Found<AmdGpu>,
    /// wgpu adapters (`--device wgpu` with Burn, `--device gpu` for the device-resident
    /// path); filled in by builds with either feature.
    pub wgpu: Found<String>,
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Sizes such as "48K", "1024K", "32M" in KiB.
fn parse_size_kib(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1),
        'M' => (&s[..s.len() - 1], 1024),
        'G' => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
}

/// Counts CPUs in a list such as "0-3,8,10-11".
fn count_cpu_list(s: &str) -> usize {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('-') {
            Some((a, b)) => {
                b.trim()
                    .parse::<usize>()
                    .unwrap_or(0)
                    .saturating_sub(a.trim().parse().unwrap_or(0))
                    + 1
            }
            None => 1,
        })
        .sum()
}

fn simd_features() -> Vec<String> {
    #[allow(unused_mut)]
    let mut v: Vec<String> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! check {
            ($($f:tt),*) => {$(
                if std::arch::is_x86_feature_detected!($f) { v.push($f.to_string()); }
            )*};
        }
        check!(
            "sse4.2",
            "avx",
            "avx2",
            "fma",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512dq",
            "avx512vnni",
            "avx512bf16"
        );
    }
    #[cfg(target_arch = "aarch64")]
    {
        if std::arch::is_aarch64_feature_detected!("neon") {
            v.push("neon".into());
        }
        if std::arch::is_aarch64_feature_detected!("sve") {
            v.push("sve".into());
        }
    }
    v
}

fn cpu(r: &Roots) -> Cpu {
    let info = read(&r.proc_.join("cpuinfo")).unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    let model = field("model name")
        .or_else(|| field("Model"))
        .unwrap_or_else(|| "unknown".into());
    let cpus = r.sys.join("devices/system/cpu");
    let logical = read(&cpus.join("online"))
        .map(|s| count_cpu_list(&s))
        .filter(|&n| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // Physical cores: distinct (package, core) pairs.
    let mut cores = std::collections::BTreeSet::new();
    for i in 0..logical {
        let t = cpus.join(format!("cpu{i}/topology"));
        if let (Some(p), Some(c)) = (
            read(&t.join("physical_package_id")),
            read(&t.join("core_id")),
        ) {
            cores.insert((p, c));
        }
    }
    let physical = if cores.is_empty() {
        logical
    } else {
        cores.len()
    };
    let mut caches = Vec::new();
    for i in 0..8 {
        let d = cpus.join(format!("cpu0/cache/index{i}"));
        let (Some(level), Some(kind), Some(size)) = (
            read(&d.join("level")),
            read(&d.join("type")),
            read(&d.join("size")),
        ) else {
            continue;
        };
        caches.push(Cache {
            level: level.parse().unwrap_or(0),
            kind,
            size_kib: parse_size_kib(&size).unwrap_or(0),
            shared_by: read(&d.join("shared_cpu_list")).map_or(1, |s| count_cpu_list(&s)),
        });
    }
    Cpu {
        model,
        logical_cores: logical,
        physical_cores: physical,
        simd: simd_features(),
        caches,
    }
}

fn memory(r: &Roots) -> Memory {
    let info = read(&r.proc_.join("meminfo")).unwrap_or_default();
    let kib = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Memory {
        total_mib: kib("MemTotal:") / 1024,
        available_mib: kib("MemAvailable:") / 1024,
    }
}

fn os(r: &Roots) -> Os {
    let rel = read(&r.etc.join("os-release")).unwrap_or_default();
    let name = rel
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| std::env::consts::OS.to_string());
    Os {
        name,
        kernel: read(&r.proc_.join("sys/kernel/osrelease")).unwrap_or_else(|| "unknown".into()),
    }
}

fn link(dev: &Path, which: &str) -> String {
    match (
        read(&dev.join(format!("{which}_link_speed"))),
        read(&dev.join(format!("{which}_link_width"))),
    ) {
        (Some(s), Some(w)) => format!("{s} x{w}"),
        _ => "unknown".into(),
    }
}

/// AMD GPUs: `/sys/class/drm/cardN/device` with vendor 0x1002 (amdgpu's files).
fn amd(r: &Roots) -> Found<AmdGpu> {
    let drm = r.sys.join("class/drm");
    let Ok(entries) = fs::read_dir(&drm) else {
        return Found::Absent {
            reason: format!("{} does not exist: no GPU driver loaded", drm.display()),
        };
    };
    let mut cards: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("card") && n[4..].chars().all(|c| c.is_ascii_digit()))
        .collect();
    cards.sort();
    let mut devices = Vec::new();
    for card in cards {
        let dev = drm.join(&card).join("device");
        if read(&dev.join("vendor")).as_deref() != Some("0x1002") {
            continue;
        }
        let mib = |f: &str| {
            read(&dev.join(f))
                .and_then(|v| v.parse::<u64>().ok())
                .map(|b| b / (1024 * 1024))
        };
        let name = read(&dev.join("product_name"))
            .filter(|s| !s.is_empty())
            .or_else(|| read(&dev.join("device")).map(|d| format!("AMD GPU (device {d})")))
            .unwrap_or_else(|| "AMD GPU".into());
        devices.push(AmdGpu {
            card,
            name,
            vram_total_mib: mib("mem_info_vram_total"),
            vram_used_mib: mib("mem_info_vram_used"),
            busy_percent: read(&dev.join("gpu_busy_percent")).and_then(|v| v.parse().ok()),
            pcie: PcieLink {
                current: link(&dev, "current"),
                max: link(&dev, "max"),
            },
        });
    }
    if devices.is_empty() {
        Found::Absent {
            reason: "no amdgpu device in /sys/class/drm".into(),
        }
    } else {
        Found::Present { devices }
    }
}

fn nvidia(r: &Roots) -> Found<NvidiaGpu> {
    if !r.nvml {
        return Found::Absent {
            reason: "NVML not queried".into(),
        };
    }
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            return Found::Absent {
                reason: format!("NVML unavailable ({e}): no NVIDIA driver"),
            };
        }
    };
    let driver = nvml
        .sys_driver_version()
        .unwrap_or_else(|_| "unknown".into());
    let count = nvml.device_count().unwrap_or(0);
    let mut devices = Vec::new();
    for i in 0..count {
        let Ok(d) = nvml.device_by_index(i) else {
            continue;
        };
        let mem = d.memory_info().ok();
        let num = |f: Result<u32, _>| {
            f.map_or_else(
                |_: nvml_wrapper::error::NvmlError| "?".into(),
                |v| v.to_string(),
            )
        };
        devices.push(NvidiaGpu {
            index: i,
            name: d.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
            memory_total_mib: mem.as_ref().map_or(0, |m| m.total / (1024 * 1024)),
            memory_used_mib: mem.as_ref().map_or(0, |m| m.used / (1024 * 1024)),
            driver: driver.clone(),
            pcie: PcieLink {
                current: format!(
                    "gen{} x{}",
                    num(d.current_pcie_link_gen()),
                    num(d.current_pcie_link_width())
                ),
                max: format!(
                    "gen{} x{}",
                    num(d.max_pcie_link_gen()),
                    num(d.max_pcie_link_width())
                ),
            },
            mig_enabled: d.mig_mode().ok().map(|m| m.current == 1),
            utilization_percent: d.utilization_rates().ok().map(|u| u.gpu),
        });
    }
    if devices.is_empty() {
        Found::Absent {
            reason: "NVML found no devices".into(),
        }
    } else {
        Found::Present { devices }
    }
}

/// This machine as a benchmark result records it: its [`Probe::fingerprint`] and the
/// whole probe as JSON.
pub(crate) fn this_machine() -> Result<(String, serde_json::Value), crate::LabError> {
    let probe = probe(&Roots::default());
    let json = serde_json::to_value(&probe).map_err(crate::LabError::encode("the probe"))?;
    Ok((probe.fingerprint(), json))
}

/// Probes the machine through `roots`.
pub fn probe(roots: &Roots) -> Probe {
    Probe {
        schema: 1,
        cpu: cpu(roots),
        memory: memory(roots),
        os: os(roots),
        nvidia: nvidia(roots),
        amd: amd(roots),
        wgpu: Found::Absent {
            reason: "this build has no GPU backend (the Burn/wgpu feature is not compiled in)"
                .into(),
        },
    }
}

impl Probe {
    /// A short, stable fingerprint of the machine for benchmark results.
    pub fn fingerprint(&self) -> String {
        format!(
            "{} | {} logical / {} physical cores | {} MiB | {}",
            self.cpu.model,
            self.cpu.logical_cores,
            self.cpu.physical_cores,
            self.memory.total_mib,
            self.os.name
        )
    }

    /// Human-readable report.
    pub fn report(&self) -> String {
        let mut s = String::new();
        let c = &self.cpu;
        s += &format!(
            "CPU      {} ({} logical, {} physical cores)\n",
            c.model, c.logical_cores, c.physical_cores
        );
        s += &format!(
            "SIMD     {}\n",
            if c.simd.is_empty() {
                "-".into()
            } else {
                c.simd.join(" ")
            }
        );
        for k in &c.caches {
            s += &format!(
                "cache    L{} {:<12} {:>7} KiB, shared by {} CPU(s)\n",
                k.level, k.kind, k.size_kib, k.shared_by
            );
        }
        s += &format!(
            "memory   {} MiB total, {} MiB available\n",
            self.memory.total_mib, self.memory.available_mib
        );
        s += &format!("OS       {} (kernel {})\n", self.os.name, self.os.kernel);
        match &self.nvidia {
            Found::Absent { reason } => s += &format!("NVIDIA   none: {reason}\n"),
            Found::Present { devices } => {
                for d in devices {
                    s += &format!(
                        "NVIDIA   #{} {}: {} / {} MiB used, driver {}, PCIe {} (max {}), MIG {}, util {}\n",
                        d.index,
                        d.name,
                        d.memory_used_mib,
                        d.memory_total_mib,
                        d.driver,
                        d.pcie.current,
                        d.pcie.max,
                        d.mig_enabled.map_or("?".into(), |m| if m {
                            "on".into()
                        } else {
                            "off".to_string()
                        }),
                        d.utilization_percent
                            .map_or("?".into(), |u| format!("{u}%"))
                    )
                }
            }
        }
        match &self.amd {
            Found::Absent { reason } => s += &format!("AMD      none: {reason}\n"),
            Found::Present { devices } => {
                for d in devices {
                    let opt = |v: Option<u64>| v.map_or("?".into(), |x| x.to_string());
                    s += &format!(
                        "AMD      {} {}: {} / {} MiB VRAM used, busy {}, PCIe {} (max {})\n",
                        d.card,
                        d.name,
                        opt(d.vram_used_mib),
                        opt(d.vram_total_mib),
                        d.busy_percent.map_or("?".into(), |b| format!("{b}%")),
                        d.pcie.current,
                        d.pcie.max
                    )
                }
            }
        }
        match &self.wgpu {
            Found::Absent { reason } => s += &format!("wgpu     none: {reason}\n"),
            Found::Present { devices } => {
                for name in devices {
                    s += &format!("wgpu     {name}\n");
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_cpu_lists_parse() {
        assert_eq!(parse_size_kib("48K"), Some(48));
        assert_eq!(parse_size_kib("32M"), Some(32768));
        assert_eq!(count_cpu_list("0-3,8,10-11"), 7);
        assert_eq!(count_cpu_list("0"), 1);
    }
}

/// One GPU reading: name, busy percentage, memory in use (MiB) if known.
pub type GpuReading = (String, f64, Option<f64>);

/// One reading of every GPU: AMD through sysfs, NVIDIA through NVML. Empty without GPUs.
pub fn gpu_busy(roots: &Roots, nvml: Option<&nvml_wrapper::Nvml>) -> Vec<GpuReading> {
    let mut out = Vec::new();
    if let Found::Present { devices } = amd(roots) {
        for d in devices {
            if let Some(b) = d.busy_percent {
                out.push((
                    format!("amd:{}", d.card),
                    f64::from(b),
                    d.vram_used_mib.map(|m| m as f64),
                ));
            }
        }
    }
    if let Some(n) = nvml {
        for i in 0..n.device_count().unwrap_or(0) {
            let Ok(d) = n.device_by_index(i) else {
                continue;
            };
            if let Ok(u) = d.utilization_rates() {
                let mem = d
                    .memory_info()
                    .ok()
                    .map(|m| (m.used / (1024 * 1024)) as f64);
                out.push((format!("nvidia:{i}"), f64::from(u.gpu), mem));
            }
        }
    }
    out
}

/// Samples GPU utilisation in the background (every `period`) until [`GpuSampler::finish`].
pub struct GpuSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<Vec<GpuUse>>>,
    latest: std::sync::Arc<std::sync::Mutex<Vec<GpuReading>>>,
}

/// Mean and peak busy percentage of one GPU over a run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GpuUse {
    pub gpu: String,
    pub mean_busy_percent: f64,
    pub max_busy_percent: f64,
    /// Peak memory in use, MiB, where the driver reports it.
    pub max_memory_used_mib: Option<f64>,
    pub samples: usize,
}

impl GpuSampler {
    pub fn start(roots: Roots, period: std::time::Duration) -> GpuSampler {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let latest = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (st, lt) = (stop.clone(), latest.clone());
        let handle = std::thread::Builder::new()
            .name("rlrig-gpu-sampler".into())
            .spawn(move || {
                let nvml = if roots.nvml {
                    nvml_wrapper::Nvml::init().ok()
                } else {
                    None
                };
                let mut acc: Vec<(String, f64, f64, usize, Option<f64>)> = Vec::new();
                while !st.load(Ordering::Relaxed) {
                    let now = gpu_busy(&roots, nvml.as_ref());
                    for (g, b, m) in &now {
                        match acc.iter_mut().find(|a| &a.0 == g) {
                            Some(a) => {
                                a.1 += b;
                                a.2 = a.2.max(*b);
                                a.3 += 1;
                                a.4 = match (a.4, m) {
                                    (Some(x), Some(y)) => Some(x.max(*y)),
                                    (x, y) => x.or(*y),
                                };
                            }
                            None => acc.push((g.clone(), *b, *b, 1, *m)),
                        }
                    }
                    if let Ok(mut l) = lt.lock() {
                        *l = now;
                    }
                    std::thread::park_timeout(period);
                }
                acc.into_iter()
                    .map(|(gpu, sum, max, n, mem)| GpuUse {
                        gpu,
                        mean_busy_percent: sum / n as f64,
                        max_busy_percent: max,
                        max_memory_used_mib: mem,
                        samples: n,
                    })
                    .collect()
            })
            .ok();
        GpuSampler {
            stop,
            handle,
            latest,
        }
    }

    /// The most recent reading.
    pub fn latest(&self) -> Vec<GpuReading> {
        self.latest.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Stops sampling; per-GPU mean and peak (empty without GPUs).
    pub fn finish(mut self) -> Vec<GpuUse> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        match self.handle.take() {
            Some(h) => {
                h.thread().unpark();
                h.join().unwrap_or_default()
            }
            None => Vec::new(),
        }
    }
}
