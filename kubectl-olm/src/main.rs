//! `kubectl-olm`: run as `kubectl olm ...` once on PATH.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    kubectl_olm::Cli::parse().main()
}
