//! `kubectl olm`: install, inspect and upgrade operators from the command
//! line by writing nothing but standard OLM objects (OperatorGroups,
//! Subscriptions, InstallPlan approvals, deletions), so that every mutating
//! command can print its objects instead (`--dry-run -o yaml`) for GitOps.
//!
//! - [`catalogs`]: CatalogSources and the PackageManifests the cluster serves.
//! - [`plan`]: plans asked of the cluster's catalog-operator (a dry run).
//! - [`objects`]: the objects written, built without I/O.
//! - [`status`]: the `juju status`-like view.
//! - [`commands`]: the commands that change things.
//! - [`show`]: what catalogs offer.
//! - [`relate`]: Relations between installed operators (`model.olm-rs.dev`).
//! - [`scale`]: how many units (machines) or replicas (pods) an application runs.
//! - [`actions`]: running an operator's actions (`model.olm-rs.dev` Actions).
//! - [`rollback`]: rolling an operator back to a recorded revision, and the
//!   revisions (`model.olm-rs.dev` OperatorRevisions).

pub mod actions;
pub mod catalog_id;
pub mod catalogs;
pub mod commands;
pub mod config;
pub mod error;
pub mod objects;
pub mod plan;
pub mod relate;
pub mod rollback;
pub mod scale;
pub mod show;
pub mod status;
pub mod suggest;
pub mod table;

use std::{
    io::{IsTerminal, Write},
    process::ExitCode,
    time::Duration,
};

use clap::{Args, Parser, Subcommand, ValueEnum};
use kube::Client;
use olm_api::v1alpha1::Approval;

pub use error::Error;

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "kubectl-olm";

/// kubectl olm: operators from OLM catalogs, installed and upgraded with standard OLM objects.
#[derive(Parser, Debug)]
#[command(name = "kubectl-olm", bin_name = "kubectl olm", version, about)]
pub struct Cli {
    /// The namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// The namespace whose catalogs every namespace may use.
    #[arg(
        long,
        global = true,
        default_value = "olm",
        env = "OLM_GLOBAL_CATALOG_NAMESPACE"
    )]
    pub global_catalog_namespace: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// How results are printed.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Tables for people.
    Table,
    /// YAML (objects as a stream `kubectl apply -f` reads).
    Yaml,
    /// JSON.
    Json,
}

/// Automatic or Manual approval of InstallPlans.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[value(rename_all = "PascalCase")]
pub enum ApprovalArg {
    /// Install upgrades as soon as they are resolved.
    #[default]
    Automatic,
    /// Wait for `kubectl olm approve`.
    Manual,
}

impl From<ApprovalArg> for Approval {
    fn from(value: ApprovalArg) -> Approval {
        match value {
            ApprovalArg::Automatic => Approval::Automatic,
            ApprovalArg::Manual => Approval::Manual,
        }
    }
}

/// What to install.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// The package.
    pub package: String,
    /// The channel (default: the package's default channel).
    #[arg(long)]
    pub channel: Option<String>,
    /// The version to start from (sets the Subscription's startingCSV).
    #[arg(long, conflicts_with = "starting_csv")]
    pub version: Option<String>,
    /// The bundle to start from.
    #[arg(long)]
    pub starting_csv: Option<String>,
    /// The catalog (`name` or `namespace/name`; default: the one with the package, highest priority first).
    #[arg(long)]
    pub catalog: Option<String>,
    /// Whether InstallPlans need approval.
    #[arg(long, value_enum, ignore_case = true, default_value_t = ApprovalArg::Automatic)]
    pub approval: ApprovalArg,
    /// The namespaces the operator watches, for a new OperatorGroup (default: its own, else all).
    #[arg(long, value_delimiter = ',')]
    pub watch_namespaces: Vec<String>,
}

/// How long to wait, and whether to.
#[derive(Args, Debug, Clone)]
pub struct WaitArgs {
    /// Return once the objects are written, without waiting for the CSVs.
    #[arg(long)]
    pub no_wait: bool,
    /// How long to wait for the CSVs to succeed, in seconds.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

impl WaitArgs {
    /// The timeout.
    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }
}

/// `--dry-run`: print instead of writing.
#[derive(Args, Debug, Clone)]
pub struct DryRunArgs {
    /// Write nothing; print what would be written (`-o yaml` prints the objects).
    #[arg(long, value_name = "client", num_args = 0..=1, default_missing_value = "client", value_parser = ["client"])]
    pub dry_run: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<Output>,
}

impl DryRunArgs {
    /// Whether this is a dry run.
    pub fn is_dry_run(&self) -> bool {
        self.dry_run.is_some()
    }
}

/// The commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the CatalogSources visible from the namespace, with their health.
    Catalogs {
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// List the packages of the visible catalogs.
    Packages {
        /// Only this catalog (`name` or `namespace/name`).
        #[arg(long)]
        catalog: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Show a package: channels, versions, APIs, dependencies, install modes.
    Show {
        /// The package.
        package: String,
        /// The catalog (`name` or `namespace/name`).
        #[arg(long)]
        catalog: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Install a package: an OperatorGroup if the namespace has none, then a Subscription.
    Install {
        /// What to install.
        #[command(flatten)]
        target: TargetArgs,
        /// Dry run and output.
        #[command(flatten)]
        dry_run: DryRunArgs,
        /// Waiting.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Show what `install` would install, dependencies first, without creating anything.
    Plan {
        /// What to install.
        #[command(flatten)]
        target: TargetArgs,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Operators, their workloads, catalogs and pending approvals.
    Status {
        /// Every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Approve the InstallPlan a package (its Subscription) or an InstallPlan name waits on.
    Approve {
        /// A package or an InstallPlan.
        target: String,
        /// Waiting.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Upgrade a package: approve its pending upgrade, or move it to another channel.
    Upgrade {
        /// The package.
        package: String,
        /// The version to upgrade to (the pending upgrade must be that version).
        #[arg(long)]
        to: Option<String>,
        /// Move the Subscription to this channel.
        #[arg(long)]
        channel: Option<String>,
        /// Dry run and output.
        #[command(flatten)]
        dry_run: DryRunArgs,
        /// Waiting.
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Uninstall a package: delete its Subscription and CSV (and with --delete-crds its CRDs).
    Uninstall {
        /// The package.
        package: String,
        /// Also delete the CRDs the CSV owns: every custom resource of them, in every namespace, is lost.
        #[arg(long)]
        delete_crds: bool,
        /// Confirm --delete-crds without asking.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Dry run and output.
        #[command(flatten)]
        dry_run: DryRunArgs,
    },
    /// Show or change a package's Subscription config: `KEY=value` (env), `env.KEY=value`,
    /// `nodeSelector.KEY=value`, `annotations.KEY=value`, `resources.limits.memory=1Gi`; `KEY-` removes.
    Config {
        /// The package.
        package: String,
        /// Settings; none prints the current config.
        settings: Vec<String>,
        /// Dry run and output.
        #[command(flatten)]
        dry_run: DryRunArgs,
    },
    /// Relate two installed operators: `A[:endpoint] B[:endpoint]`, one providing and one
    /// requiring an interface (an endpoint may be left out when only one fits).
    Relate {
        /// One side: an installed operator's package, and optionally its endpoint.
        a: String,
        /// The other side.
        b: String,
        /// Dry run and output.
        #[command(flatten)]
        dry_run: DryRunArgs,
    },
    /// Run N units of an application: on machines, sets `spec.units.<APP>` of the
    /// MachinePool its CSV names (an application not scaled runs on every machine);
    /// in pods, sets its Subscription's annotation `olm-rs.dev/replicas`, which
    /// olm-operator applies to each Deployment of its CSV.
    Scale {
        /// The application (an installed operator's package).
        application: String,
        /// How many units.
        units: u32,
        /// Dry run and output.
        #[command(flatten)]
        dry_run: DryRunArgs,
    },
    /// Roll an operator back to a recorded revision (by default the one before the installed
    /// one) and hold its Subscription there: the Subscription gets annotation
    /// `olm-rs.dev/rollback-to`, which catalog-operator acts on. `--lift` removes the hold.
    Rollback {
        /// The Subscription (or its package).
        subscription: String,
        /// The revision: its number, its name (its CSV's) or its version
        /// (`kubectl olm revisions` lists them).
        #[arg(long)]
        to: Option<String>,
        /// Lift the hold: remove the annotation, so the Subscription follows its channel again.
        #[arg(long, conflicts_with = "to")]
        lift: bool,
        /// Dry run and output.
        #[command(flatten)]
        dry_run: DryRunArgs,
    },
    /// List the recorded revisions of a Subscription's operator, and where a rollback stands.
    Revisions {
        /// The Subscription (or its package).
        subscription: String,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Day-2 actions: run, actions, operations, show-action, cancel.
    #[command(flatten)]
    Action(actions::ActionCommand),
}

/// What every command works with.
pub struct Env<'a> {
    /// The client.
    pub client: Client,
    /// The namespace.
    pub namespace: String,
    /// The global catalog namespace.
    pub global_namespace: String,
    /// Standard output.
    pub out: &'a mut (dyn Write + Send + Sync),
    /// Standard error (progress, warnings).
    pub err: &'a mut (dyn Write + Send + Sync),
    /// Whether to colour tables.
    pub colour: bool,
}

impl Env<'_> {
    /// Prints `object` as `output` asks: JSON for JSON, else YAML.
    pub fn print_object<T: serde::Serialize>(
        &mut self,
        object: &T,
        output: Option<Output>,
    ) -> Result<(), Error> {
        if output == Some(Output::Json) {
            let text = serde_json::to_string_pretty(object).map_err(|e| Error::Render(e.to_string()))?;
            return Ok(writeln!(self.out, "{text}")?);
        }
        let text = serde_saphyr::to_string(object).map_err(|e| Error::Render(e.to_string()))?;
        Ok(self.out.write_all(text.as_bytes())?)
    }
}

impl Cli {
    /// Parses `args` (the first is the program name).
    pub fn parse_from_args<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Cli::try_parse_from(args)
    }

    /// Runs the command against the kubeconfig's cluster, on stdout and stderr.
    pub fn main(self) -> ExitCode {
        let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                return ExitCode::FAILURE;
            }
        };
        runtime.block_on(async move {
            let client = match Client::try_default().await {
                Ok(client) => client,
                Err(e) => {
                    eprintln!("error: cannot reach the cluster of the kubeconfig: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            let mut out = std::io::stdout();
            let mut err = std::io::stderr();
            match self.run(client, &mut out, &mut err, colour).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    let _ = out.flush();
                    eprintln!("error: {e}");
                    ExitCode::FAILURE
                }
            }
        })
    }

    /// Runs the command with `client`, writing to `out` and `err`.
    pub async fn run(
        self,
        client: Client,
        out: &mut (dyn Write + Send + Sync),
        err: &mut (dyn Write + Send + Sync),
        colour: bool,
    ) -> Result<(), Error> {
        let namespace = self
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let mut env = Env {
            client,
            namespace,
            global_namespace: self.global_catalog_namespace.clone(),
            out,
            err,
            colour,
        };
        match self.command {
            Command::Catalogs { output } => show::catalogs(&mut env, output).await,
            Command::Packages { catalog, output } => {
                show::packages(&mut env, catalog.as_deref(), output).await
            }
            Command::Show {
                package,
                catalog,
                output,
            } => show::show(&mut env, &package, catalog.as_deref(), output).await,
            Command::Install {
                target,
                dry_run,
                wait,
            } => commands::install(&mut env, &target, &dry_run, &wait).await,
            Command::Plan { target, output } => commands::plan(&mut env, &target, output).await,
            Command::Status {
                all_namespaces,
                output,
            } => commands::status(&mut env, all_namespaces, output).await,
            Command::Approve { target, wait } => commands::approve(&mut env, &target, &wait).await,
            Command::Upgrade {
                package,
                to,
                channel,
                dry_run,
                wait,
            } => {
                commands::upgrade(
                    &mut env,
                    &package,
                    to.as_deref(),
                    channel.as_deref(),
                    &dry_run,
                    &wait,
                )
                .await
            }
            Command::Uninstall {
                package,
                delete_crds,
                yes,
                dry_run,
            } => commands::uninstall(&mut env, &package, delete_crds, yes, &dry_run).await,
            Command::Config {
                package,
                settings,
                dry_run,
            } => commands::config(&mut env, &package, &settings, &dry_run).await,
            Command::Relate { a, b, dry_run } => relate::relate(&mut env, &a, &b, &dry_run).await,
            Command::Scale {
                application,
                units,
                dry_run,
            } => scale::scale(&mut env, &application, units, &dry_run).await,
            Command::Rollback {
                subscription,
                to,
                lift,
                dry_run,
            } => rollback::rollback(&mut env, &subscription, to.as_deref(), lift, &dry_run).await,
            Command::Revisions { subscription, output } => {
                rollback::revisions(&mut env, &subscription, output).await
            }
            Command::Action(command) => actions::dispatch(&mut env, command).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::parse_from_args(std::iter::once("kubectl-olm").chain(args.iter().copied()))
            .expect("valid arguments")
    }

    #[test]
    fn install_takes_olm_words() {
        let cli = parse(&[
            "install",
            "demo-app",
            "-n",
            "team",
            "--channel",
            "stable",
            "--approval",
            "Manual",
            "--watch-namespaces",
            "a,b",
            "--dry-run",
            "-o",
            "yaml",
        ]);
        assert_eq!(cli.namespace.as_deref(), Some("team"));
        let Command::Install {
            target,
            dry_run,
            wait,
        } = cli.command
        else {
            panic!("install")
        };
        assert_eq!(target.package, "demo-app");
        assert_eq!(target.approval, ApprovalArg::Manual);
        assert_eq!(target.watch_namespaces, ["a", "b"]);
        assert!(dry_run.is_dry_run());
        assert_eq!(dry_run.output, Some(Output::Yaml));
        assert!(!wait.no_wait);
    }

    #[test]
    fn dry_run_takes_kubectls_value_and_version_excludes_starting_csv() {
        let cli = parse(&["install", "p", "--dry-run=client"]);
        assert!(matches!(cli.command, Command::Install { dry_run, .. } if dry_run.is_dry_run()));
        let cli = parse(&["install", "p", "--approval", "manual"]);
        assert!(
            matches!(cli.command, Command::Install { target, .. } if target.approval == ApprovalArg::Manual)
        );
        assert!(
            Cli::parse_from_args([
                "kubectl-olm",
                "install",
                "p",
                "--version",
                "1",
                "--starting-csv",
                "x"
            ])
            .is_err()
        );
        assert!(Cli::parse_from_args(["kubectl-olm", "install", "p", "--dry-run=server"]).is_err());
    }

    #[test]
    fn status_takes_all_namespaces_and_formats() {
        let cli = parse(&["status", "-A", "-o", "json"]);
        assert!(matches!(
            cli.command,
            Command::Status {
                all_namespaces: true,
                output: Output::Json
            }
        ));
        let cli = parse(&["config", "demo-app", "LOG=debug", "nodeSelector.disk-"]);
        assert!(matches!(cli.command, Command::Config { settings, .. } if settings.len() == 2));
    }

    #[test]
    fn scale_takes_an_application_and_a_count() {
        let cli = parse(&["scale", "demo-db", "3", "--dry-run", "-o", "yaml"]);
        assert!(
            matches!(cli.command, Command::Scale { application, units: 3, dry_run }
            if application == "demo-db" && dry_run.is_dry_run())
        );
        assert!(Cli::parse_from_args(["kubectl-olm", "scale", "demo-db", "-1"]).is_err());
    }

    #[test]
    fn relate_takes_two_sides() {
        let cli = parse(&["relate", "demo-app:db", "demo-db", "-n", "team", "--dry-run"]);
        assert_eq!(cli.namespace.as_deref(), Some("team"));
        assert!(matches!(cli.command, Command::Relate { a, b, dry_run }
            if a == "demo-app:db" && b == "demo-db" && dry_run.is_dry_run()));
        assert!(Cli::parse_from_args(["kubectl-olm", "relate", "demo-app"]).is_err());
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
