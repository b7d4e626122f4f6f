//! `catalog-operator render PATH...`: bundle directories, package directories
//! or package manifests → a file-based catalog on stdout, like `opm render`.

use std::{
    io::{self, Write},
    path::PathBuf,
    process::ExitCode,
};

use olm_catalog::fbc;

use super::{load, output};

/// Arguments of `render`.
#[derive(clap::Args, Debug)]
pub struct RenderArgs {
    /// Bundle directories (`manifests/` + `metadata/`), package directories of
    /// bundle versions, package manifests, or file-based catalogs.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

impl RenderArgs {
    /// Renders every path into one catalog and prints it as a JSON stream, sorted.
    pub fn run(&self) -> ExitCode {
        output::run(|out, err| self.write(out, err))
    }

    /// Writes the catalog of every path to `out` as a JSON stream, sorted, and
    /// the warnings about the input to `err`; returns the exit code.
    pub fn write(&self, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<ExitCode> {
        let (catalog, warnings) = match load::load(&self.paths) {
            Ok(loaded) => loaded,
            Err(e) => return output::bad_input(err, &e),
        };
        for warning in &warnings {
            writeln!(err, "warning: {warning}")?;
        }
        out.write_all(fbc::to_json_stream(&catalog).as_bytes())?;
        Ok(ExitCode::SUCCESS)
    }
}
