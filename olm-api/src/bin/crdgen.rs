//! Writes every CRD of olm-rs to a directory (default `crds/`), one file each.
//! Run it as `make crds` whenever a type in olm-api changes.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "crds".to_owned()));
    std::fs::create_dir_all(&dir)?;
    for (name, yaml) in olm_api::crds::render_all() {
        let path = dir.join(&name);
        std::fs::write(&path, yaml)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
