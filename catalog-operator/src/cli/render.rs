//! `catalog-operator render PATH...`: bundle directories, package directories
//! or package manifests → a file-based catalog on stdout, like `opm render`.

use std::{path::PathBuf, process::ExitCode};

use olm_catalog::{Catalog, bundle, fbc, render};

use crate::source;

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
        let mut catalog = Catalog::default();
        for path in &self.paths {
            if bundle::bundle_root(path).is_some() {
                match render::render_bundle_dir(path, &render::RenderOptions::default()) {
                    Ok(bundle) => catalog.bundles.push(bundle),
                    Err(e) => return super::bad_input(&e),
                }
                continue;
            }
            match source::load(path) {
                Ok((content, warnings)) => {
                    for warning in warnings {
                        eprintln!("warning: {warning}");
                    }
                    catalog.extend(content);
                }
                Err(e) => return super::bad_input(&e),
            }
        }
        catalog.sort();
        print!("{}", fbc::to_json_stream(&catalog));
        ExitCode::SUCCESS
    }
}
