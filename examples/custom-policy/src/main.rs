//! Runs this crate's scenario — `first-fit` beside Chameleon — on the
//! simulator, or on both backends with `--live`, through dyncore's library
//! API, and writes the report folder.
//!
//! ```sh
//! cargo run -p custom-policy -- [--live] [OUT]
//! ```

use std::path::PathBuf;

use dyncore::{Backend, Registry, RunArgs, Runner};

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let live = args.iter().any(|a| a == "--live");
    args.retain(|a| a != "--live");
    let out = args.first().map_or_else(|| PathBuf::from("out").join("custom-policy"), PathBuf::from);
    let runner = Runner::new(&out).with_registry(Registry::builtin().with(&custom_policy::POLICY));
    let scenario = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenario.toml");
    runner.run(&RunArgs {
        files: vec![scenario],
        backend: if live { Backend::Both } else { Backend::Sim },
        // A live run at a fifth of the scenario's length.
        time_scale: live.then_some(0.2),
        seeds: (!live).then_some(3),
        ..RunArgs::default()
    })
}
