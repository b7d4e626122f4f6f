//! `catalog-operator validate PATH`: the problems of a catalog, one a line;
//! exit code 1 when any is an error.

use std::{path::PathBuf, process::ExitCode};

use olm_catalog::validate::{self, Severity};

use crate::source;

/// Arguments of `validate`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// A file-based catalog, a package directory, or a directory of packages.
    pub path: PathBuf,
}

impl ValidateArgs {
    /// Prints every problem, errors first; exit 1 with errors, 0 without, 2 when unreadable.
    pub fn run(&self) -> ExitCode {
        let catalog = match source::load(&self.path) {
            Ok((catalog, _)) => catalog,
            Err(e) => return super::bad_input(&e),
        };
        let mut problems = validate::validate(&catalog);
        problems.sort_by_key(|p| {
            (
                p.severity() != Severity::Error,
                p.package().to_owned(),
                p.to_string(),
            )
        });
        let errors = problems
            .iter()
            .filter(|p| p.severity() == Severity::Error)
            .count();
        for problem in &problems {
            let label = match problem.severity() {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            println!("{label}: {problem}");
        }
        eprintln!(
            "{}: {} packages, {} bundles: {errors} errors, {} warnings",
            self.path.display(),
            catalog.packages.len(),
            catalog.bundles.len(),
            problems.len() - errors
        );
        if errors > 0 {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        }
    }
}
