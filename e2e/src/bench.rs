//! What the bench binaries (`src/bin/olm-rs-bench-*.rs`) read the same way:
//! a binary's request counts from its `/metrics`, memory figures and the
//! machine's load.

use std::collections::BTreeMap;

/// `olm_kube_requests_total` by (verb, resource), from a `/metrics` body.
pub fn request_counts(metrics: &str) -> BTreeMap<(String, String), f64> {
    let label = |labels: &str, name: &str| {
        let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
        let end = labels[start..].find('"')? + start;
        Some(labels[start..end].to_owned())
    };
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("olm_kube_requests_total{"))
        .filter_map(|rest| {
            let (labels, value) = rest.split_once("} ")?;
            Some((
                (label(labels, "verb")?, label(labels, "resource")?),
                value.trim().parse().ok()?,
            ))
        })
        .collect()
}

/// A KiB figure in MiB, `?` when unknown.
pub fn mib(kib: Option<u64>) -> String {
    kib.map_or("?".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

/// The load averages `uptime` prints.
pub fn uptime() -> String {
    std::process::Command::new("uptime")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .and_then(|line| {
            line.split_once("load average:")
                .map(|(_, load)| format!("load average{load}"))
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_counts_read_verb_and_resource() {
        let body = "# HELP olm_kube_requests_total x\n\
                    olm_kube_requests_total{resource=\"leases.coordination.k8s.io\",verb=\"update\"} 30\n\
                    olm_kube_requests_total{resource=\"pods\",verb=\"watch\"} 2\n";
        let counts = request_counts(body);
        assert_eq!(
            counts.get(&("update".to_owned(), "leases.coordination.k8s.io".to_owned())),
            Some(&30.0)
        );
        assert_eq!(counts.len(), 2);
        assert_eq!(mib(Some(2048)), "2.0 MiB");
        assert_eq!(mib(None), "?");
    }
}
