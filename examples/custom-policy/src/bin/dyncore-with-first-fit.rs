//! A whole `dyncore` command with `first-fit` in it: `run`, `check`,
//! `exec`, `sweep`, `bench` and `policies` all know the policy, as the
//! built-in ones. This is how an out-of-tree policy gets the full command
//! line, as scx users build their own scheduler binary.
//!
//! ```sh
//! cargo run -p custom-policy --bin dyncore-with-first-fit -- policies
//! cargo run -p custom-policy --bin dyncore-with-first-fit -- exec --policy first-fit -- make -j2
//! ```

fn main() -> std::process::ExitCode {
    dyncore::cli::main(dyncore::Registry::builtin().with(&custom_policy::POLICY))
}
