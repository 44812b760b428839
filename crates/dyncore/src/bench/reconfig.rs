//! `dyncore bench reconfig` (being built; see its issue).

use std::path::Path;

use anyhow::{Result, bail};

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: &Args, _out: &Path) -> Result<()> {
    bail!("`dyncore bench reconfig` is not built yet")
}
