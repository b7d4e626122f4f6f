//! `catalog-operator validate PATH`: the problems of a catalog, one a line;
//! exit code 1 when any is an error.

use std::{
    io::{self, Write},
    path::PathBuf,
    process::ExitCode,
};

use olm_catalog::validate::{self, Severity};

use super::{load, output};

/// Arguments of `validate`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// A file-based catalog, a package directory, a directory of packages, or
    /// a bundle directory.
    pub path: PathBuf,
}

impl ValidateArgs {
    /// Prints every problem, errors first; exit 1 with errors, 0 without, 2 when unreadable.
    pub fn run(&self) -> ExitCode {
        output::run(|out, err| self.write(out, err))
    }

    /// Writes every problem to `out`, one a line, errors first, then the
    /// warnings about the input that `render` prints for it too; a summary goes
    /// to `err`. Returns exit code 1 with errors, 0 without, 2 when unreadable.
    pub fn write(&self, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<ExitCode> {
        let (catalog, load_warnings) = match load::load(std::slice::from_ref(&self.path)) {
            Ok(loaded) => loaded,
            Err(e) => return output::bad_input(err, &e),
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
            writeln!(out, "{label}: {problem}")?;
        }
        for warning in &load_warnings {
            writeln!(out, "warning: {warning}")?;
        }
        writeln!(
            err,
            "{}: {} packages, {} bundles: {errors} errors, {} warnings",
            self.path.display(),
            catalog.packages.len(),
            catalog.bundles.len(),
            problems.len() - errors + load_warnings.len()
        )?;
        Ok(if errors > 0 {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        })
    }
}
