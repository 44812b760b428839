//! Embeds the default machine profile of the `runtime` reconfiguration
//! mechanism: `profiles/reference.toml` (measured by `dyncore bench reconfig
//! --write-profile`) when it exists at build time, else the hand-written
//! test fixture, named as such wherever the profile is reported.

use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let manifest = Path::new(&manifest);
    let profiles = manifest.join("../../profiles");
    let reference = profiles.join("reference.toml");
    let fixture = manifest.join("tests/fixtures/profile-2cpu.toml");
    // A directory is scanned for changes, so dropping reference.toml in
    // rebuilds the simulator with it.
    println!("cargo:rerun-if-changed={}", profiles.display());
    println!("cargo:rerun-if-changed={}", fixture.display());
    println!("cargo:rerun-if-changed=build.rs");
    let (source, path) = if reference.is_file() {
        ("profiles/reference.toml".to_string(), reference)
    } else {
        (
            "crates/dyncore-scenario/tests/fixtures/profile-2cpu.toml (a hand-written fixture: profiles/reference.toml \
             was absent at build time)"
                .to_string(),
            fixture,
        )
    };
    let path = path.canonicalize().expect("the default profile exists");
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("default_profile.rs");
    let code = format!(
        "/// Where the built-in default profile came from.\n\
         pub const DEFAULT_PROFILE_SOURCE: &str = {source:?};\n\
         /// The built-in default profile (TOML).\n\
         pub const DEFAULT_PROFILE_TOML: &str = include_str!({:?});\n",
        path.display().to_string()
    );
    std::fs::write(out, code).expect("OUT_DIR is writable");
}
