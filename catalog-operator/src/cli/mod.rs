//! The offline commands of catalog-operator, in the spirit of `opm`:
//! `render`, `validate` and `resolve`. They read catalogs from disk and need
//! no cluster.

mod render;
mod resolve;
mod serve;
mod validate;

use std::process::ExitCode;

pub use render::RenderArgs;
pub use resolve::ResolveArgs;
pub use resolve::{
    GroupReport, GroupStatus, OfflineCatalogs, Report, ResolveInputError, StepReport, SubscriptionArg,
    resolve, resolve_objects,
};
pub use serve::{ServeArgs, ServeCommandError};
pub use validate::ValidateArgs;

/// Exit code of a command whose input could not be read.
pub const EXIT_BAD_INPUT: u8 = 2;

/// Prints `error` with its chain of causes to stderr and returns exit code 2.
fn bad_input(error: &dyn std::error::Error) -> ExitCode {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    eprintln!("error: {message}");
    ExitCode::from(EXIT_BAD_INPUT)
}
