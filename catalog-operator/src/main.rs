//! catalog-operator: see the library documentation and `catalog-operator --help`.

use std::process::ExitCode;

use clap::Parser;

#[global_allocator]
static ALLOCATOR: olm_runtime::Allocator = olm_runtime::Allocator;

fn main() -> ExitCode {
    catalog_operator::Args::parse().main()
}
