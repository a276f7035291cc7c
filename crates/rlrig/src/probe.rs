//! `rlrig probe`.

use anyhow::Result;
use clap::Args;
use rlrig_lab::probe::{Roots, probe};

#[derive(Args)]
pub struct ProbeArgs {
    /// Print the probe as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(a: ProbeArgs) -> Result<()> {
    #[allow(unused_mut)]
    let mut p = probe(&Roots::default());
    #[cfg(feature = "burn")]
    {
        let names = rlrig_burn::wgpu_adapters();
        p.wgpu = if names.is_empty() {
            rlrig_lab::probe::Found::Absent {
                reason: "no Vulkan, Metal or DX12 adapter found".into(),
            }
        } else {
            rlrig_lab::probe::Found::Present { devices: names }
        };
    }
    // Without Burn, the device path's own adapter is the wgpu line.
    #[cfg(all(feature = "gpu", not(feature = "burn")))]
    {
        p.wgpu = match rlrig_gpu::Gpu::open() {
            Ok(g) => rlrig_lab::probe::Found::Present {
                devices: vec![g.describe()],
            },
            Err(e) => rlrig_lab::probe::Found::Absent {
                reason: e.to_string(),
            },
        };
    }
    // Measured here, not read: what the worker pool's waiting strategy is based on.
    let wake = rlrig_env::pool::wake_up_cost();
    let spin = rlrig_env::pool::spin_time();
    let trip = rlrig_env::pool::round_trip_cost();
    let copy = gpu_copy();
    if a.json {
        let mut v = serde_json::to_value(&p)?;
        v["threads"] = serde_json::json!({
            "wake_up_us": wake.as_secs_f64() * 1e6,
            "pool_spin_us": spin.as_secs_f64() * 1e6,
            "round_trip_ns": trip.map(|t| t.as_secs_f64() * 1e9),
        });
        if let Some(c) = &copy {
            v["gpu_copy"] = c.json.clone();
        }
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        outln!("{}", p.report().trim_end());
        outln!(
            "threads  a parked thread wakes in {:.0} us here; idle pool workers spin {:.0} us before they park (RLRIG_SPIN_US overrides)",
            wake.as_secs_f64() * 1e6,
            spin.as_secs_f64() * 1e6
        );
        if let Some(t) = trip {
            outln!(
                "         a cache line goes to another core and back in {:.0} ns (~60 ns within a core complex, ~300 ns across; small learner updates pay it for every job and every piece of data they share)",
                t.as_secs_f64() * 1e9
            );
        }
        if let Some(c) = &copy {
            outln!("{}", c.line);
        }
    }
    Ok(())
}

/// The device copy rates, as a JSON value and a report line (a build with `--features
/// gpu` only; the NVIDIA lines above name the PCIe link they run over).
struct GpuCopy {
    json: serde_json::Value,
    line: String,
}

#[cfg(not(feature = "gpu"))]
fn gpu_copy() -> Option<GpuCopy> {
    None
}

#[cfg(feature = "gpu")]
fn gpu_copy() -> Option<GpuCopy> {
    const BYTES: usize = 64 << 20;
    const ROUNDS: usize = 3;
    let r = rlrig_gpu::Gpu::open().and_then(|g| {
        let c = rlrig_gpu::copy_rates(&g, BYTES, ROUNDS)?;
        Ok((g.describe(), c))
    });
    Some(match r {
        Ok((name, c)) => GpuCopy {
            json: serde_json::json!({
                "device": name,
                "bytes": c.bytes,
                "rounds": c.rounds,
                "host_to_device_mb_s": c.host_to_device_mb_s,
                "device_to_host_mb_s": c.device_to_host_mb_s,
            }),
            line: format!(
                "copy     {name}: host -> device {:.0} MB/s, device -> host {:.0} MB/s (a {} MiB buffer through wgpu, best of {})",
                c.host_to_device_mb_s,
                c.device_to_host_mb_s,
                c.bytes >> 20,
                c.rounds
            ),
        },
        Err(e) => GpuCopy {
            json: serde_json::json!({ "error": e.to_string() }),
            line: format!("copy     not measured: {e}"),
        },
    })
}
