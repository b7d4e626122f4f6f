//! catalog-operator: the controllers for CatalogSources, Subscriptions and
//! InstallPlans, and the offline catalog commands (`render`, `validate`,
//! `resolve`); `run` also serves the PackageManifest API (`olm-packageserver`).
//!
//! - [`source`]: reading catalog content from disk in any layout OLM uses (from `olm-catalog`).
//! - [`snapshot`]: catalog content → the resolver's input (from `olm-resolution`).
//! - [`catalogs`]: the shared in-memory store of catalog snapshots (from `olm-catalog-store`).
//! - [`bundles`]: bundle manifests read on demand (from `olm-catalog-store`).
//! - [`channel_heads`]: the channel heads' CSV descriptions and icons kept with a catalog
//!   (from `olm-catalog-store`).
//! - [`controllers`]: the CatalogSource, Subscription and InstallPlan controllers.
//! - [`metrics`]: OLM's catalog-operator metrics.
//! - [`go_duration`]: Go durations, as OLM's fields and annotations write them.
//! - [`images`]: catalog and bundle images: pulled in process or unpacked by a Job (and the
//!   Job's own steps), their pull secrets and cache, and the image flags of `run`.
//! - [`run`]: the `run` command, wiring the controllers with olm-runtime.
//! - [`cli`]: the offline commands and `serve` (the operator-registry gRPC API of `olm-registry`).

pub mod cli;
pub mod controllers;
pub mod go_duration;
pub mod images;
pub mod metrics;
pub mod run;

pub use olm_catalog::source;
pub use olm_catalog_store::{bundles, catalogs, channel_heads};
pub use olm_resolution::snapshot;

#[cfg(test)]
mod registry_tests;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// catalog-operator: OLM's catalog half (CatalogSources, Subscriptions, InstallPlans) and offline catalog tools.
#[derive(Parser, Debug)]
#[command(version, about)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands of catalog-operator.
// Parsed once at start: the size of `run`'s arguments does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Render bundles or packages into a file-based catalog (JSON stream on stdout).
    Render(cli::RenderArgs),
    /// Check a catalog; exit 1 when it has errors.
    Validate(cli::ValidateArgs),
    /// Resolve Subscriptions offline against catalogs on disk; exit 1 when unsatisfiable.
    Resolve(cli::ResolveArgs),
    /// Serve a catalog over the operator-registry gRPC API, as `opm serve` does.
    Serve(cli::ServeArgs),
    /// Run the controllers for CatalogSources, Subscriptions and InstallPlans.
    Run(run::RunArgs),
    /// The steps of a bundle unpack Job (run in its Pod, not by hand).
    Unpack(images::unpack_jobs::steps::UnpackArgs),
}

impl Args {
    /// Runs an offline command. The long-running commands (`serve`, `run`) are
    /// run by `main` on a tokio runtime; this hands them back.
    pub fn run_offline(self) -> Result<ExitCode, Box<Command>> {
        match self.command {
            Command::Render(args) => Ok(args.run()),
            Command::Validate(args) => Ok(args.run()),
            Command::Resolve(args) => Ok(args.run()),
            Command::Unpack(args) => Ok(args.run()),
            other => Err(Box::new(other)),
        }
    }

    /// Runs the command: an offline one at once, a long-running one (`serve`,
    /// `run`) on a tokio runtime until it stops. Errors are printed on stderr.
    pub fn main(self) -> ExitCode {
        let command = match self.run_offline() {
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
        let result: Result<(), Box<dyn std::error::Error>> = runtime.block_on(async {
            match *command {
                Command::Serve(args) => Ok(args.run().await?),
                Command::Run(args) => Ok(run::run(args).await?),
                _ => Err("not a long-running command".into()),
            }
        });
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {}", error_chain(e.as_ref()));
                ExitCode::FAILURE
            }
        }
    }
}

use olm_runtime::errors::error_chain;

/// The message of an error and its causes, on one line.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}
