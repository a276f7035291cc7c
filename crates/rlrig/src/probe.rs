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
    let p = probe(&Roots::default());
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&p)?);
    } else {
        outln!("{}", p.report().trim_end());
    }
    Ok(())
}
