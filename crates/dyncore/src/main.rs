//! The `dyncore` command: [`dyncore::cli::main`] with the built-in
//! policies. With no arguments it runs every shipped scenario on the
//! simulator and writes a report folder (`out/`).

fn main() -> std::process::ExitCode {
    dyncore::cli::main(dyncore::Registry::builtin())
}
