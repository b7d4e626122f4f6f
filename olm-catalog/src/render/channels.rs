//! A package's channels from its bundles: how their upgrade edges are made ([`GraphMode`]), the
//! order of their entries, and the default channel.

use std::{collections::BTreeMap, path::PathBuf};

use crate::{
    model::{Channel, ChannelEntry, Icon, Package},
    version::Version,
};

/// How the upgrade edges of a package's channels are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GraphMode {
    /// Each CSV's `spec.replaces`, `spec.skips` and `olm.skipRange` (community-operators
    /// `updateGraph: replaces-mode`, the default).
    #[default]
    Replaces,
    /// Semver order within each channel: every bundle replaces the previous one, CSV `replaces`
    /// ignored, skips and skip ranges kept (`updateGraph: semver-mode`).
    Semver,
    /// As [`GraphMode::Semver`], and every bundle also skips the lower patch releases of its own
    /// minor version (`updateGraph: semver-skippatch-mode`).
    SemverSkipPatch,
}

/// What channel building needs of each bundle.
pub(super) struct Summary {
    pub(super) dir: PathBuf,
    pub(super) name: String,
    pub(super) version: Version,
    pub(super) channels: Vec<String>,
    pub(super) default_channel: Option<String>,
    pub(super) replaces: Option<String>,
    pub(super) skips: Vec<String>,
    pub(super) skip_range: Option<String>,
    pub(super) icon: Option<Icon>,
    pub(super) description: Option<String>,
}

/// Ascending version order (name breaks ties), the order channels list entries in.
pub(super) fn version_order(summaries: &[Summary]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..summaries.len()).collect();
    order.sort_by(|&a, &b| {
        summaries[a]
            .version
            .cmp_precedence(&summaries[b].version)
            .then_with(|| summaries[a].name.cmp(&summaries[b].name))
    });
    order
}

/// The default channel declared, and by what: the template's, else the
/// default-channel annotation of the highest version that has one.
pub(super) fn declared_default_channel(
    template: Option<&(PathBuf, Package)>,
    summaries: &[Summary],
    order: &[usize],
) -> Option<(String, String)> {
    if let Some((file, p)) = template
        && let Some(d) = &p.default_channel
    {
        return Some((d.clone(), format!("template {}", file.display())));
    }
    let &i = order
        .iter()
        .rev()
        .find(|&&i| summaries[i].default_channel.is_some())?;
    let d = summaries[i].default_channel.clone().unwrap_or_default();
    Some((d, format!("annotations of {}", summaries[i].name)))
}

/// The default channel: the `declared` one when it has a bundle here, else the
/// only channel, else the channel of the highest version (first by name); a
/// fallback is warned about unless it is the only channel and none was declared.
pub(super) fn default_channel(
    declared: Option<(String, String)>,
    channels: &[Channel],
    summaries: &[Summary],
    order: &[usize],
    warnings: &mut Vec<String>,
) -> String {
    if let Some((d, from)) = &declared {
        if channels.iter().any(|ch| ch.name == *d) {
            return d.clone();
        }
        warnings.push(format!(
            "default channel {d:?} (from the {from}) has no bundle in this directory"
        ));
    }
    let only = channels.len() == 1;
    let fallback = if only {
        channels[0].name.clone()
    } else {
        // The channel of the highest version, first by name.
        let top = &summaries[order[order.len() - 1]];
        let mut cs = top.channels.clone();
        cs.sort();
        cs.into_iter().next().unwrap_or_default()
    };
    if declared.is_some() || !only {
        warnings.push(format!("default channel set to {fallback:?}"));
    }
    fallback
}

pub(super) fn build_channels(
    package: &str,
    summaries: &[Summary],
    order: &[usize],
    mode: GraphMode,
) -> Vec<Channel> {
    let mut members: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &i in order {
        for c in &summaries[i].channels {
            members.entry(c).or_default().push(i);
        }
    }
    members
        .into_iter()
        .map(|(name, idx)| {
            let entries = idx
                .iter()
                .enumerate()
                .map(|(pos, &i)| {
                    let s = &summaries[i];
                    let mut skips = s.skips.clone();
                    let replaces = match mode {
                        GraphMode::Replaces => s.replaces.clone(),
                        GraphMode::Semver | GraphMode::SemverSkipPatch => {
                            pos.checked_sub(1).map(|p| summaries[idx[p]].name.clone())
                        }
                    };
                    if mode == GraphMode::SemverSkipPatch
                        && let Some(v) = s.version.semver()
                    {
                        for &j in &idx[..pos.saturating_sub(1)] {
                            let other = &summaries[j];
                            if other
                                .version
                                .semver()
                                .is_some_and(|o| o.major == v.major && o.minor == v.minor)
                                && !skips.contains(&other.name)
                            {
                                skips.push(other.name.clone());
                            }
                        }
                    }
                    ChannelEntry {
                        name: s.name.clone(),
                        replaces,
                        skips,
                        skip_range: s.skip_range.clone(),
                    }
                })
                .collect();
            Channel {
                name: name.to_owned(),
                package: package.to_owned(),
                entries,
                properties: Vec::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(name: &str, version: &str, channels: &[&str]) -> Summary {
        Summary {
            dir: PathBuf::from(name),
            name: name.to_owned(),
            version: Version::new(version),
            channels: channels.iter().map(|c| (*c).to_owned()).collect(),
            default_channel: None,
            replaces: None,
            skips: Vec::new(),
            skip_range: None,
            icon: None,
            description: None,
        }
    }

    fn channel(name: &str) -> Channel {
        Channel {
            name: name.to_owned(),
            package: "foo".to_owned(),
            entries: Vec::new(),
            properties: Vec::new(),
        }
    }

    #[test]
    fn the_default_channel_falls_back_to_the_highest_versions_channel_with_a_warning() {
        let summaries = [
            summary("foo.v1", "1.0.0", &["stable"]),
            summary("foo.v2", "2.0.0", &["fast", "stable"]),
        ];
        let order = version_order(&summaries);
        let channels = [channel("fast"), channel("stable")];
        let mut warnings = Vec::new();
        let declared = Some(("stable".to_owned(), "annotations of foo.v2".to_owned()));
        assert_eq!(
            default_channel(declared, &channels, &summaries, &order, &mut warnings),
            "stable"
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        let declared = Some(("beta".to_owned(), "annotations of foo.v2".to_owned()));
        assert_eq!(
            default_channel(declared, &channels, &summaries, &order, &mut warnings),
            "fast"
        );
        assert_eq!(
            warnings,
            [
                "default channel \"beta\" (from the annotations of foo.v2) has no bundle in this directory",
                "default channel set to \"fast\"",
            ]
        );
        // The only channel, none declared: no warning.
        let mut warnings = Vec::new();
        assert_eq!(
            default_channel(None, &channels[1..], &summaries, &order, &mut warnings),
            "stable"
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
