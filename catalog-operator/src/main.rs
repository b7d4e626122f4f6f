//! catalog-operator: the controllers for CatalogSources, Subscriptions and
//! InstallPlans, and offline catalog tools.

use clap::Parser;

/// Runs the controllers for CatalogSources, Subscriptions and InstallPlans.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {}

fn main() {
    let Args {} = Args::parse();
    eprintln!("catalog-operator: no controller is wired in yet; see README.md");
}
