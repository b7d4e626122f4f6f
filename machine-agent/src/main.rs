//! `machine-agent`: see the library's docs.

use clap::Parser;

fn main() -> std::process::ExitCode {
    machine_agent::cli::Cli::parse().main()
}
