//! catalog-operator: see the library documentation and `catalog-operator --help`.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    catalog_operator::Args::parse().main()
}
