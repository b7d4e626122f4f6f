//! catalog-operator: the controllers for CatalogSources, Subscriptions and
//! InstallPlans, and the offline catalog commands (`render`, `validate`,
//! `resolve`).
//!
//! - [`source`]: reading catalog content from disk in any layout OLM uses.
//! - [`snapshot`]: catalog content → the resolver's input.
//! - [`registry`]: the operator-registry gRPC API (server, client).
//! - [`catalogs`]: the shared in-memory store of catalog snapshots.
//! - [`controllers`]: the CatalogSource, Subscription and InstallPlan controllers.
//! - [`metrics`]: OLM's catalog-operator metrics.
//! - [`run`]: the `run` command, wiring the controllers with olm-runtime.
//! - [`cli`]: the offline commands and `serve`.

pub mod catalogs;
pub mod cli;
pub mod controllers;
pub mod metrics;
pub mod registry;
pub mod run;
pub mod snapshot;
pub mod source;

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
}

impl Args {
    /// Runs an offline command. The long-running commands (`serve`, `run`) are
    /// run by `main` on a tokio runtime; this hands them back.
    pub fn run_offline(self) -> Result<ExitCode, Box<Command>> {
        match self.command {
            Command::Render(args) => Ok(args.run()),
            Command::Validate(args) => Ok(args.run()),
            Command::Resolve(args) => Ok(args.run()),
            other => Err(Box::new(other)),
        }
    }
}
