//! Command-line settings of leader election.

use std::{
    collections::hash_map::RandomState,
    hash::{BuildHasher, Hasher},
    time::Duration,
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;

use super::{
    ElectionTask, LeaderElectionError, LeaderElector, Leadership, LeaseConfig, elector::LeaderMetricsHandle,
};
use crate::metrics::LeaderMetrics;

/// Leader election flags, shared by both binaries (flatten into their `Args`).
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionArgs {
    /// Elect one leader among the replicas through a Lease; only the leader writes.
    /// With `--leader-elect=false` this process always writes: run a single replica.
    #[arg(long, env = "OLM_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// Name of the Lease [default: the binary's name].
    #[arg(long, env = "OLM_LEASE_NAME")]
    pub lease_name: Option<String>,

    /// Namespace of the Lease [default: $POD_NAMESPACE, else the client's namespace].
    #[arg(long, env = "OLM_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// This replica's identity in the Lease [default: the host name and a random suffix].
    #[arg(long, env = "POD_NAME")]
    pub leader_identity: Option<String>,

    /// How long standbys wait after the Lease last changed before taking it over.
    #[arg(long, env = "OLM_LEASE_DURATION", default_value = "10s", value_parser = parse_duration)]
    pub lease_duration: Duration,

    /// How long the leader keeps writing after the start of its last successful
    /// renewal; must be shorter than the lease duration.
    #[arg(long, env = "OLM_RENEW_DEADLINE", default_value = "5s", value_parser = parse_duration)]
    pub renew_deadline: Duration,

    /// How often the leader renews and standbys try to acquire.
    #[arg(long, env = "OLM_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,
}

impl LeaderElectionArgs {
    /// Election turned off: for binaries that run one process per scope and never
    /// compete for a Lease (the machine agent: one per machine).
    pub fn off() -> Self {
        LeaderElectionArgs {
            leader_elect: false,
            lease_name: None,
            lease_namespace: None,
            leader_identity: None,
            lease_duration: Duration::from_secs(10),
            renew_deadline: Duration::from_secs(5),
            retry_period: Duration::from_secs(2),
        }
    }

    /// The Lease settings these flags describe; `None` when election is off.
    ///
    /// `default_lease_name` is the binary's name (e.g. `olm-operator`).
    pub fn lease_config(
        &self,
        client: &Client,
        default_lease_name: &str,
    ) -> Result<Option<LeaseConfig>, LeaderElectionError> {
        if !self.leader_elect {
            return Ok(None);
        }
        let namespace = self
            .lease_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok().filter(|ns| !ns.is_empty()))
            .unwrap_or_else(|| client.default_namespace().to_owned());
        let config = LeaseConfig {
            name: self
                .lease_name
                .clone()
                .unwrap_or_else(|| default_lease_name.to_owned()),
            namespace,
            identity: self
                .leader_identity
                .clone()
                .filter(|id| !id.is_empty())
                .unwrap_or_else(default_identity),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        };
        config.validate()?;
        Ok(Some(config))
    }

    /// Starts the election these flags describe (or, with `--leader-elect=false`,
    /// returns a standalone [`Leadership`] and a task that never ends).
    ///
    /// The election stops and releases the Lease when `shutdown` resolves.
    pub fn start<F>(
        &self,
        client: Client,
        default_lease_name: &str,
        metrics: Option<&LeaderMetrics>,
        shutdown: F,
    ) -> Result<(Leadership, ElectionTask), LeaderElectionError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.start_owned(client, default_lease_name, metrics, None, shutdown)
    }

    /// [`start`](Self::start), with `owner` as an owner of the Lease (see
    /// [`super::owner`]).
    pub fn start_owned<F>(
        &self,
        client: Client,
        default_lease_name: &str,
        metrics: Option<&LeaderMetrics>,
        owner: Option<OwnerReference>,
        shutdown: F,
    ) -> Result<(Leadership, ElectionTask), LeaderElectionError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let Some(config) = self.lease_config(&client, default_lease_name)? else {
            tracing::info!("leader election is off: this replica writes without a lease");
            if let Some(metrics) = metrics {
                LeaderMetricsHandle::new(metrics, default_lease_name).set_leader(true);
            }
            return Ok((Leadership::standalone(), ElectionTask::none()));
        };
        let mut elector = LeaderElector::new(client, config)?.with_owner(owner);
        if let Some(metrics) = metrics {
            elector = elector.with_metrics(metrics);
        }
        Ok(elector.spawn(shutdown))
    }
}

/// The identity of this replica when none is given: the host name (the pod name in a
/// cluster) and a random suffix, so two processes on one host never share it.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "olm-rs".to_owned());
    // RandomState is seeded from the operating system's randomness: enough for a suffix
    // that only has to differ between processes.
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!("{host}_{:08x}", hasher.finish() as u32)
}

/// Parses a duration: `15s`, `1500ms`, `2m`, `1h`, `1.5s`, or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 15s or 500ms"))?;
    let seconds = match unit.trim() {
        "" | "s" => number,
        "ms" => number / 1000.0,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        other => return Err(format!("unknown unit {other:?} in {text:?}: use ms, s, m or h")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{text:?} is not a valid duration: {e}"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        le: LeaderElectionArgs,
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("10d").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn flags_have_the_documented_defaults() {
        let cli = Cli::try_parse_from(["bin"]).unwrap();
        assert!(cli.le.leader_elect);
        assert_eq!(cli.le.lease_duration, super::super::DEFAULT_LEASE_DURATION);
        assert_eq!(cli.le.renew_deadline, super::super::DEFAULT_RENEW_DEADLINE);
        assert_eq!(cli.le.lease_duration, Duration::from_secs(10));
        assert_eq!(cli.le.renew_deadline, Duration::from_secs(5));
        assert_eq!(cli.le.retry_period, Duration::from_secs(2));

        let cli = Cli::try_parse_from([
            "bin",
            "--leader-elect=false",
            "--lease-name=x",
            "--lease-namespace=y",
            "--lease-duration=30s",
            "--renew-deadline=20s",
            "--retry-period=500ms",
        ])
        .unwrap();
        assert!(!cli.le.leader_elect);
        assert_eq!(cli.le.lease_name.as_deref(), Some("x"));
        assert_eq!(cli.le.lease_namespace.as_deref(), Some("y"));
        assert_eq!(cli.le.retry_period, Duration::from_millis(500));
    }

    #[test]
    fn default_identities_differ_between_calls() {
        let a = default_identity();
        let b = default_identity();
        assert!(!a.is_empty());
        assert_ne!(a, b);
    }
}
