//! catalog-operator: the controllers for CatalogSources, Subscriptions and
//! InstallPlans, and the offline catalog commands (`render`, `validate`,
//! `resolve`).
//!
//! - [`source`]: reading catalog content from disk in any layout OLM uses.
//! - [`snapshot`]: catalog content → the resolver's input.
//! - [`cli`]: the offline commands.

pub mod cli;
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
}

impl Args {
    /// Runs the chosen command.
    pub fn run(self) -> ExitCode {
        match self.command {
            Command::Render(args) => args.run(),
            Command::Validate(args) => args.run(),
            Command::Resolve(args) => args.run(),
        }
    }
}
