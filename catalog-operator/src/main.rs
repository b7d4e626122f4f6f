//! catalog-operator: see the library documentation and `catalog-operator --help`.

use std::process::ExitCode;

use catalog_operator::{Args, Command};
use clap::Parser;

fn main() -> ExitCode {
    let command = match Args::parse().run_offline() {
        Ok(code) => return code,
        Err(command) => command,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result: anyhow::Result<()> = runtime.block_on(async {
        match *command {
            Command::Serve(args) => Ok(args.run().await?),
            Command::Run(args) => Ok(catalog_operator::run::run(args).await?),
            _ => anyhow::bail!("not a long-running command"),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
