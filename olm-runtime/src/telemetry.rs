//! Logging: `tracing` with a level filter from `--log-level` (or `RUST_LOG`) and JSON
//! or text output.

use tracing_subscriber::{EnvFilter, fmt, layer::SubscriberExt, util::SubscriberInitExt};

/// How log lines are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// JSON inside a cluster (`KUBERNETES_SERVICE_HOST` is set), text elsewhere.
    #[default]
    Auto,
    /// One JSON object per line, for log collectors.
    Json,
    /// Human-readable lines.
    Text,
}

impl LogFormat {
    /// `Json` or `Text`: what `Auto` means in this environment.
    pub fn resolve(self) -> LogFormat {
        match self {
            LogFormat::Auto if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => LogFormat::Json,
            LogFormat::Auto => LogFormat::Text,
            other => other,
        }
    }
}

/// Logging flags (flatten into the binary's `Args`).
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct TelemetryArgs {
    /// Log filter: a level (`info`, `debug`) or `tracing` directives such as
    /// `info,olm_operator=debug,kube=warn`.
    #[arg(long, env = "RUST_LOG", default_value = "info")]
    pub log_level: String,

    /// Log format.
    #[arg(long, env = "OLM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Auto)]
    pub log_format: LogFormat,
}

/// Errors of logging setup.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The filter does not parse.
    #[error("invalid log filter {filter:?}")]
    Filter {
        /// The filter as given.
        filter: String,
        /// Why it does not parse.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// A global subscriber was already installed.
    #[error("failed to install the log subscriber")]
    Init(#[source] tracing_subscriber::util::TryInitError),
}

impl TelemetryArgs {
    /// The level filter these flags describe.
    pub fn filter(&self) -> Result<EnvFilter, TelemetryError> {
        EnvFilter::try_new(&self.log_level).map_err(|source| TelemetryError::Filter {
            filter: self.log_level.clone(),
            source,
        })
    }

    /// Installs the global subscriber. Call once, first thing in `main`.
    pub fn init(&self) -> Result<(), TelemetryError> {
        let filter = self.filter()?;
        let registry = tracing_subscriber::registry().with(filter);
        let result = match self.log_format.resolve() {
            LogFormat::Json => registry
                .with(
                    fmt::layer()
                        .json()
                        .flatten_event(true)
                        .with_current_span(true)
                        .with_span_list(false),
                )
                .try_init(),
            _ => registry.with(fmt::layer().with_ansi(colours())).try_init(),
        };
        result.map_err(TelemetryError::Init)
    }
}

/// Whether text lines are coloured: only on a terminal, and never with
/// `NO_COLOR` set, so that log files and `kubectl logs` carry no escape codes.
fn colours() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        telemetry: TelemetryArgs,
    }

    #[test]
    fn flags_parse_and_filters_are_checked() {
        let cli = Cli::try_parse_from(["bin", "--log-level=debug,kube=warn", "--log-format=json"]).unwrap();
        assert_eq!(cli.telemetry.log_format, LogFormat::Json);
        assert_eq!(cli.telemetry.log_format.resolve(), LogFormat::Json);
        assert!(cli.telemetry.filter().is_ok());
        assert!(Cli::try_parse_from(["bin", "--log-format=xml"]).is_err());

        let bad = TelemetryArgs {
            log_level: "info,=[".into(),
            log_format: LogFormat::Text,
        };
        assert!(bad.filter().is_err());
    }
}
