//! olm-operator: the controllers for ClusterServiceVersions and OperatorGroups.
//! Everything but argument parsing lives in the library.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = olm_operator::Args::parse();
    olm_operator::run(args).await?;
    Ok(())
}
