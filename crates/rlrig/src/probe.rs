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
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        outln!("{}", p.report().trim_end());
    }
    Ok(())
}
