//! The decision of serving, table-tested without a cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::controllers::csv::certs::Authority;
use crate::controllers::csv::{
    build, fixtures,
    validate::{self, Targets},
};

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).expect("a valid time")
}

fn served(deployment: &str) -> certs::Served {
    certs::Served {
        deployment: deployment.to_owned(),
        ports: Vec::new(),
    }
}

fn stored(issued: &Issued, rotate_at: Option<Timestamp>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            annotations: rotate_at
                .map(|due| BTreeMap::from([(certs::ROTATE_AT_ANNOTATION.to_owned(), due.to_string())])),
            ..ObjectMeta::default()
        },
        data: Some(certs::secret_data(issued)),
        ..Secret::default()
    }
}

/// What a case is called, the certificate and renewal time stored per
/// Deployment, now, and until when the certificates are kept.
type Case<'a> = (
    &'a str,
    [Option<(&'a Issued, Option<Timestamp>)>; 2],
    i64,
    Option<Timestamp>,
);

#[test]
fn stored_certificates_are_kept_only_when_every_one_is_fresh_and_not_due() {
    let lifetimes = certs::Lifetimes::default();
    let served = [served("api"), served("hooks")];
    let authority = Authority::new(at(0), lifetimes.valid_for).expect("a CA");
    let issue = |deployment: &str, namespace: &str| {
        let hosts = certs::hosts(&certs::service_name(deployment), namespace);
        authority.serving(&hosts).expect("a certificate")
    };
    let (api, hooks) = (issue("api", "ops"), issue("hooks", "ops"));
    let elsewhere = issue("hooks", "other");
    let (soon, later) = (Some(at(100)), Some(at(200)));
    let cases: [Case<'_>; 6] = [
        ("all fresh", [Some((&api, later)), Some((&hooks, soon))], 10, soon),
        ("one missing", [Some((&api, later)), None], 10, None),
        (
            "one without renewal time",
            [Some((&api, later)), Some((&hooks, None))],
            10,
            None,
        ),
        ("one due", [Some((&api, later)), Some((&hooks, soon))], 100, None),
        (
            "one for other hosts",
            [Some((&api, later)), Some((&elsewhere, soon))],
            10,
            None,
        ),
        ("none", [None, None], 10, None),
    ];
    for (what, secrets, now, expected) in cases {
        let found: BTreeMap<String, Secret> = served
            .iter()
            .zip(secrets)
            .filter_map(|(one, secret)| {
                secret.map(|(issued, due)| (one.deployment.clone(), stored(issued, due)))
            })
            .collect();
        let kept = keep_stored(&served, &found, "ops", at(now), lifetimes);
        assert_eq!(kept.as_ref().map(|(_, due)| *due), expected, "{what}");
        if let Some((certificates, _)) = kept {
            assert_eq!(certificates.get("api"), Some(&api), "{what}");
            assert_eq!(certificates.get("hooks"), Some(&hooks), "{what}");
        }
    }
}

/// A CSV of all namespaces whose Deployment `demo` serves a validating
/// webhook and the APIService `v1.gadgets.example.com`.
fn serving_csv() -> ClusterServiceVersion {
    fixtures::small_csv(
        &fixtures::modes(&["AllNamespaces"]),
        r#"  apiservicedefinitions:
    owned:
    - {name: gadgets, group: gadgets.example.com, version: v1, kind: Gadget, deploymentName: demo, containerPort: 5443}
  webhookdefinitions:
  - generateName: vdemo.example.com
    type: ValidatingAdmissionWebhook
    deploymentName: demo
    containerPort: 443
    sideEffects: None
    admissionReviewVersions: [v1]
    webhookPath: /validate
    rules: [{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}]"#,
    )
}

fn children(csv: &ClusterServiceVersion, membership: &Membership) -> Children {
    let validation = validate::validate(csv, &fixtures::found(Vec::new(), Vec::new(), &[""]));
    let strategy = validation.strategy.expect("a valid strategy");
    build::build(csv, membership, &strategy).expect("builds")
}

fn certified(csv: &ClusterServiceVersion) -> Certified {
    let lifetimes = certs::Lifetimes::default();
    let issue = super::super::certify(csv, Certificates::Issue, at(0), lifetimes);
    issue.expect("issues").expect("serves")
}

/// (kind, name) of each object.
fn named(objects: &[Desired]) -> Vec<(String, String)> {
    objects
        .iter()
        .map(|d| (d.resource.kind.clone(), d.name().to_owned()))
        .collect()
}

#[test]
fn a_serving_install_writes_services_and_secrets_first_then_its_registrations() {
    let csv = serving_csv();
    let membership = fixtures::membership(Targets::All);
    let certified = certified(&csv);
    let mut copies = fixtures::Copies::default();
    copies
        .labelled
        .push((VALIDATING.to_owned(), (None, "no-longer-declared".to_owned())));
    let found = Found::default();
    let crds = BTreeMap::new();
    let input = Input {
        csv: &csv,
        membership: &membership,
        certified: Some(&certified),
        found: &found,
        crds: &crds,
        live: &copies,
    };
    let mut built = children(&csv, &membership);
    let writes = plan(&input, &mut built).expect("plans");

    let service = certs::service_name("demo");
    let secret = certs::secret_name(&service);
    assert_eq!(
        named(&writes.before),
        [
            ("Service".to_owned(), service.clone()),
            ("Secret".to_owned(), secret.clone())
        ]
    );
    let kinds: Vec<String> = writes.after.iter().map(|d| d.resource.kind.clone()).collect();
    assert_eq!(kinds, [VALIDATING, API_SERVICE]);
    assert_eq!(writes.after[1].name(), "v1.gadgets.example.com");
    let at_once = |objects: &[Desired]| objects.iter().skip(1).all(Desired::is_alongside_previous);
    assert!(
        at_once(&writes.before) && at_once(&writes.after),
        "each group is written at once"
    );
    let removed: Vec<&str> = writes.removals.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(removed, ["no-longer-declared"]);

    let deployment = &built.deployments[0];
    let volumes = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.volumes.clone());
    assert!(
        volumes
            .unwrap_or_default()
            .iter()
            .any(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some(secret.as_str())),
        "the Deployment mounts its certificate"
    );
    assert!(
        built
            .roles
            .iter()
            .any(|r| r.metadata.name.as_deref() == Some(secret.as_str())),
        "OLM's RBAC for the Secret"
    );

    let mut current = fixtures::Copies::default();
    for desired in writes.before.iter().chain(&writes.after) {
        current.carry(desired);
    }
    let mut again = children(&csv, &membership);
    let writes = plan(
        &Input {
            live: &current,
            ..input
        },
        &mut again,
    )
    .expect("plans");
    assert!(
        writes.before.is_empty() && writes.after.is_empty() && writes.removals.is_empty(),
        "all current: {writes:?}"
    );
}

#[test]
fn a_csv_that_serves_nothing_removes_what_it_served() {
    let csv = fixtures::small_csv(&fixtures::modes(&["AllNamespaces"]), "");
    let membership = fixtures::membership(Targets::All);
    let mut copies = fixtures::Copies::default();
    copies
        .labelled
        .push((VALIDATING.to_owned(), (None, "old-validating".to_owned())));
    copies
        .labelled
        .push((MUTATING.to_owned(), (None, "old-mutating".to_owned())));
    copies
        .labelled
        .push((API_SERVICE.to_owned(), (None, "v1.old.example.com".to_owned())));
    let (found, crds) = (Found::default(), BTreeMap::new());
    let input = Input {
        csv: &csv,
        membership: &membership,
        certified: None,
        found: &found,
        crds: &crds,
        live: &copies,
    };
    assert_eq!(
        certificates(&csv, &found, at(0), certs::Lifetimes::default()),
        Certificates::None
    );
    let mut built = children(&csv, &membership);
    let writes = plan(&input, &mut built).expect("plans");
    assert!(writes.before.is_empty() && writes.after.is_empty());
    let removed: Vec<(&str, &str)> = writes
        .removals
        .iter()
        .map(|r| (r.resource.kind.as_str(), r.name.as_str()))
        .collect();
    assert_eq!(
        removed,
        [
            (VALIDATING, "old-validating"),
            (MUTATING, "old-mutating"),
            (API_SERVICE, "v1.old.example.com")
        ]
    );
}

#[test]
fn an_api_service_is_taken_over_only_from_nobody_itself_its_predecessor_or_a_holder_that_steps_aside() {
    let mut csv = serving_csv();
    csv.spec.replaces = Some("demo.v0.9.0".to_owned());
    let held = |name: &str, state| Holding::Csv {
        namespace: fixtures::NAMESPACE.to_owned(),
        name: name.to_owned(),
        state,
    };
    let cases = [
        ("nobody", None, true),
        ("itself", Some(held("demo.v1.0.0", HolderState::Active)), true),
        (
            "its predecessor",
            Some(held("demo.v0.9.0", HolderState::Active)),
            true,
        ),
        (
            "a CSV that is gone",
            Some(held("other.v1", HolderState::Gone)),
            true,
        ),
        (
            "a CSV being replaced",
            Some(held("other.v1", HolderState::SteppingAside)),
            true,
        ),
        (
            "another live CSV",
            Some(held("other.v1", HolderState::Active)),
            false,
        ),
        ("no CSV", Some(Holding::Unowned), false),
    ];
    for (what, holding, adopted) in cases {
        let result = adoptable(&csv, "v1.gadgets.example.com", holding.as_ref());
        assert_eq!(result.is_ok(), adopted, "{what}: {result:?}");
        if let Err(error) = result {
            assert!(error.is_terminal(), "{what}: a conflict is refused, not retried");
            assert!(
                error.to_string().contains("v1.gadgets.example.com"),
                "{what}: {error}"
            );
        }
    }
}
