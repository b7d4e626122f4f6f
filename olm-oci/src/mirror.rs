//! Registry mirrors, in the spirit of ImageDigestMirrorSet and registries.conf:
//! a source repository prefix maps to mirror prefixes that are tried first, in
//! order, before the source itself. As with ImageDigestMirrorSet, mirrors are
//! used only for references by digest (content that cannot differ).

/// One source prefix and its mirrors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorRule {
    /// A repository or registry prefix, e.g. `quay.io/operatorhubio`.
    pub source: String,
    /// Prefixes to use instead, in order of preference.
    pub mirrors: Vec<String>,
}

/// Every mirror rule, most specific source first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mirrors {
    rules: Vec<MirrorRule>,
}

impl Mirrors {
    /// Mirrors from rules; the longest matching source wins.
    pub fn new(mut rules: Vec<MirrorRule>) -> Self {
        rules.sort_by_key(|r| std::cmp::Reverse(r.source.len()));
        Self { rules }
    }

    /// The rules, most specific source first.
    pub fn rules(&self) -> &[MirrorRule] {
        &self.rules
    }

    /// Parses `source=mirror1,mirror2` items (the form of a command-line flag).
    pub fn parse(items: &[String]) -> Result<Self, String> {
        let mut rules = Vec::new();
        for item in items {
            let (source, mirrors) = item
                .split_once('=')
                .ok_or_else(|| format!("mirror {item:?} is not of the form source=mirror[,mirror...]"))?;
            let mirrors: Vec<String> = mirrors
                .split(',')
                .map(str::trim)
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect();
            if source.trim().is_empty() || mirrors.is_empty() {
                return Err(format!("mirror {item:?} names no source or no mirror"));
            }
            rules.push(MirrorRule {
                source: source.trim().to_owned(),
                mirrors,
            });
        }
        Ok(Self::new(rules))
    }

    /// The references to try for `reference`, in order: its mirrors (only when it
    /// names a digest), then the reference itself.
    pub fn candidates(&self, reference: &str) -> Vec<String> {
        let mut out = Vec::new();
        if reference.contains("@sha256:") {
            let rule = self.rules.iter().find(|r| {
                reference
                    .strip_prefix(&r.source)
                    .is_some_and(|rest| rest.starts_with(['/', '@', ':']))
            });
            if let Some(rule) = rule {
                let rest = &reference[rule.source.len()..];
                out.extend(rule.mirrors.iter().map(|m| format!("{m}{rest}")));
            }
        }
        out.push(reference.to_owned());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_go_to_the_most_specific_mirror_first_then_the_source() {
        let mirrors = Mirrors::parse(&[
            "quay.io=mirror.local/quay".into(),
            "quay.io/operatorhubio=m1.local/hub,m2.local/hub".into(),
        ])
        .unwrap();
        let digest = "quay.io/operatorhubio/kube-green@sha256:abc";
        assert_eq!(
            mirrors.candidates(digest),
            vec![
                "m1.local/hub/kube-green@sha256:abc",
                "m2.local/hub/kube-green@sha256:abc",
                "quay.io/operatorhubio/kube-green@sha256:abc"
            ]
        );
        assert_eq!(
            mirrors.candidates("quay.io/other/x@sha256:abc"),
            vec![
                "mirror.local/quay/other/x@sha256:abc",
                "quay.io/other/x@sha256:abc"
            ]
        );
    }

    #[test]
    fn tags_and_unrelated_prefixes_are_not_mirrored() {
        let mirrors = Mirrors::parse(&["quay.io/operatorhubio=m.local/hub".into()]).unwrap();
        assert_eq!(
            mirrors.candidates("quay.io/operatorhubio/x:v1"),
            vec!["quay.io/operatorhubio/x:v1"]
        );
        // `quay.io/operatorhubio2` is not under `quay.io/operatorhubio`.
        assert_eq!(
            mirrors.candidates("quay.io/operatorhubio2/x@sha256:abc"),
            vec!["quay.io/operatorhubio2/x@sha256:abc"]
        );
        assert!(Mirrors::parse(&["no-equals".into()]).is_err());
    }
}
