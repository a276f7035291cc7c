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
    // Measured here, not read: what the worker pool's waiting strategy is based on.
    let wake = rlrig_env::pool::wake_up_cost();
    let spin = rlrig_env::pool::spin_time();
    if a.json {
        let mut v = serde_json::to_value(&p)?;
        v["threads"] = serde_json::json!({
            "wake_up_us": wake.as_secs_f64() * 1e6,
            "pool_spin_us": spin.as_secs_f64() * 1e6,
        });
        outln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        outln!("{}", p.report().trim_end());
        outln!(
            "threads  a parked thread wakes in {:.0} us here; idle pool workers spin {:.0} us before they park (RLRIG_SPIN_US overrides)",
            wake.as_secs_f64() * 1e6,
            spin.as_secs_f64() * 1e6
        );
    }
    Ok(())
}
