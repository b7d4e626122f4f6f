//! olm-operator: the controllers for ClusterServiceVersions, OperatorGroups
//! and MachinePools.

use clap::Parser;

/// Runs the controllers for ClusterServiceVersions, OperatorGroups and MachinePools.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {}

fn main() {
    let Args {} = Args::parse();
    eprintln!("olm-operator: no controller is wired in yet; see README.md");
}
