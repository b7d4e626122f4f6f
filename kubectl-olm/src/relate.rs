//! `relate`: a Relation (`model.olm-rs.dev`) between two installed
//! operators, `A[:endpoint] B[:endpoint]`, built without I/O and applied;
//! olm-operator says in its `Ready` condition whether it can be made.

use kube::{
    Api,
    api::{ObjectMeta, Patch, PatchParams},
};
use olm_api::model::{ApplicationEndpoint, Relation, RelationSpec};

use crate::{DryRunArgs, Env, FIELD_MANAGER, error::Error};

/// The longest object name `relate` makes: a DNS label.
const MAX_NAME: usize = 63;

/// One side as typed, `application[:endpoint]`.
pub fn side(text: &str) -> Result<ApplicationEndpoint, Error> {
    let (application, endpoint) = match text.split_once(':') {
        Some((application, endpoint)) => (application, Some(endpoint)),
        None => (text, None),
    };
    if application.is_empty() || endpoint.is_some_and(|e| e.is_empty() || e.contains(':')) {
        return Err(Error::Usage(format!(
            "{text:?} is not APPLICATION[:ENDPOINT]; name an installed operator's package, and optionally one of its endpoints (kubectl olm show PACKAGE lists them)"
        )));
    }
    Ok(ApplicationEndpoint {
        application: application.to_owned(),
        endpoint: endpoint.map(str::to_owned),
        namespace: None,
    })
}

/// The Relation's name: its sides as `a-ep-b-ep`, made a DNS label; one
/// too long keeps its start and ends in a hash of the whole.
pub fn name(a: &ApplicationEndpoint, b: &ApplicationEndpoint) -> String {
    let words: Vec<&str> = [a, b]
        .iter()
        .flat_map(|side| std::iter::once(side.application.as_str()).chain(side.endpoint.as_deref()))
        .collect();
    let mut name = String::new();
    for c in words.join("-").chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && (name.is_empty() || name.ends_with('-'))) {
            name.push(c);
        }
    }
    let whole = name.trim_end_matches('-').to_owned();
    if whole.len() <= MAX_NAME {
        return whole;
    }
    let hash = format!("{:08x}", fnv1a32(words.join(":").as_bytes()));
    let kept = whole[..MAX_NAME - hash.len() - 1].trim_end_matches('-');
    format!("{kept}-{hash}")
}

/// The 32-bit FNV-1a hash of `bytes`.
fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

/// The Relation of `a` and `b` in `namespace`.
pub fn relation(namespace: &str, a: ApplicationEndpoint, b: ApplicationEndpoint) -> Relation {
    Relation {
        metadata: ObjectMeta {
            name: Some(name(&a, &b)),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        spec: RelationSpec {
            endpoints: vec![a, b],
        },
        status: None,
    }
}

/// `relate A[:endpoint] B[:endpoint]`.
pub async fn relate(env: &mut Env<'_>, a: &str, b: &str, dry_run: &DryRunArgs) -> Result<(), Error> {
    let relation = relation(&env.namespace, side(a)?, side(b)?);
    let name = relation.metadata.name.clone().unwrap_or_default();
    let namespace = env.namespace.clone();
    if dry_run.is_dry_run() {
        return match dry_run.output {
            Some(output) => env.print_object(&relation, Some(output)),
            None => Ok(writeln!(env.out, "Relation {name} would be created (dry run)")?),
        };
    }
    let api: Api<Relation> = Api::namespaced(env.client.clone(), &namespace);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Apply(&relation),
    )
    .await
    .map_err(Error::kube(format!("apply Relation {name} in {namespace}")))?;
    writeln!(
        env.out,
        "Relation {name} created in {namespace}: {a} with {b}; `kubectl get relation {name} -n {namespace}` shows whether it is Ready, and why not"
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_parse_and_bad_ones_are_refused() {
        let a = side("demo-app:db").unwrap();
        assert_eq!(
            (a.application.as_str(), a.endpoint.as_deref()),
            ("demo-app", Some("db"))
        );
        let b = side("demo-db").unwrap();
        assert_eq!((b.application.as_str(), b.endpoint), ("demo-db", None));
        for bad in ["", ":db", "app:", "app:db:x"] {
            let err = side(bad).unwrap_err().to_string();
            assert!(err.contains("is not APPLICATION[:ENDPOINT]"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn names_are_dns_labels_made_of_the_sides() {
        let name_of = |a: &str, b: &str| name(&side(a).unwrap(), &side(b).unwrap());
        assert_eq!(name_of("demo-app:db", "demo-db:db"), "demo-app-db-demo-db-db");
        assert_eq!(name_of("demo-app", "demo-db"), "demo-app-demo-db");
        assert_eq!(name_of("App.v1.0.0", "db"), "app-v1-0-0-db");
        let long = name_of(&format!("{}:db", "a".repeat(60)), "b:cache");
        assert_eq!(long.len(), 63, "{long}");
        assert!(long.starts_with("aaaa"), "{long}");
        // The same sides give the same name; others another.
        assert_eq!(long, name_of(&format!("{}:db", "a".repeat(60)), "b:cache"));
        assert_ne!(long, name_of(&format!("{}:db", "a".repeat(60)), "b:logs"));
        let relation = relation("team", side("a:x").unwrap(), side("b").unwrap());
        assert_eq!(relation.metadata.namespace.as_deref(), Some("team"));
        assert_eq!(relation.spec.endpoints.len(), 2);
    }
}
