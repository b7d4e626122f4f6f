//! The offline commands of catalog-operator, in the spirit of `opm`:
//! `render`, `validate` and `resolve`. They read catalogs from disk and need
//! no cluster. They write through [`output::run`], so they end quietly when
//! the reader of their output goes away (`| head`).

mod load;
mod output;
mod render;
mod resolve;
mod serve;
mod validate;

pub use render::RenderArgs;
pub use resolve::ResolveArgs;
pub use resolve::{
    GroupReport, GroupStatus, OfflineCatalogs, Report, ResolveInputError, StepReport, SubscriptionArg,
    resolve, resolve_objects,
};
pub use serve::{ServeArgs, ServeCommandError};
pub use validate::ValidateArgs;

pub use output::EXIT_BAD_INPUT;

#[cfg(test)]
mod tests {
    use std::{
        path::{Path, PathBuf},
        process::ExitCode,
    };

    use super::*;

    /// A scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("olm-rs-cli-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create a scratch directory");
            Self(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("create a directory");
        for entry in std::fs::read_dir(from).expect("list a directory") {
            let entry = entry.expect("a directory entry");
            let target = to.join(entry.file_name());
            if entry.file_type().expect("a file type").is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).expect("copy a file");
            }
        }
    }

    /// A copy of the demo catalog's bundle `package/version`, at `to`.
    fn demo_bundle(package: &str, version: &str, to: &Path) {
        let from = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../catalogs/demo-bundles")
            .join(package)
            .join(version);
        copy_dir(&from, to);
    }

    /// The `warning: ...` lines of some output.
    fn warnings(output: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(output)
            .lines()
            .filter(|line| line.starts_with("warning: "))
            .map(str::to_owned)
            .collect()
    }

    /// `render PATH` prints warnings, and `validate PATH` reports each of them.
    fn assert_validate_reports_render_warnings(path: &Path) -> Vec<String> {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let render = RenderArgs {
            paths: vec![path.to_owned()],
        };
        let code = render.write(&mut out, &mut err).expect("write to memory");
        assert_eq!(code, ExitCode::SUCCESS, "{}", String::from_utf8_lossy(&err));
        let render_warnings = warnings(&err);
        assert!(
            !render_warnings.is_empty(),
            "render warns about {}",
            path.display()
        );

        let (mut out, mut err) = (Vec::new(), Vec::new());
        let validate = ValidateArgs {
            path: path.to_owned(),
        };
        validate.write(&mut out, &mut err).expect("write to memory");
        let validate_warnings = warnings(&out);
        for warning in &render_warnings {
            assert!(
                validate_warnings.contains(warning),
                "validate reports {warning:?}; it reported {validate_warnings:?}"
            );
        }
        let summary = String::from_utf8_lossy(&err);
        assert!(
            summary.contains(&format!(", {} warnings", validate_warnings.len())),
            "the summary counts every warning: {summary}"
        );
        render_warnings
    }

    #[test]
    fn validate_reports_a_default_channel_without_bundle_as_render_does() {
        let scratch = Scratch::new("default-channel");
        let package = scratch.0.join("demo-db");
        let bundle = package.join("1.0.0");
        demo_bundle("demo-db", "1.0.0", &bundle);
        let annotations = bundle.join("metadata/annotations.yaml");
        let text = std::fs::read_to_string(&annotations).expect("read annotations.yaml");
        let text = text.replace("channel.default.v1: stable", "channel.default.v1: beta");
        std::fs::write(&annotations, text).expect("write annotations.yaml");

        let warnings = assert_validate_reports_render_warnings(&package);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("default channel \"beta\"") && w.contains("has no bundle")),
            "{warnings:?}"
        );
    }

    #[test]
    fn validate_reports_a_skipped_bundle_file_as_render_does() {
        let scratch = Scratch::new("skipped-file");
        let bundle = scratch.0.join("demo-db-1.0.0");
        demo_bundle("demo-db", "1.0.0", &bundle);
        std::fs::write(bundle.join("manifests/empty.yaml"), "# no object\n").expect("write empty.yaml");

        let warnings = assert_validate_reports_render_warnings(&bundle);
        assert!(warnings.iter().any(|w| w.contains("empty.yaml")), "{warnings:?}");
    }
}
