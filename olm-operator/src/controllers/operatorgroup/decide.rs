//! What reconciling an OperatorGroup changes (pure): its `olm.providedAPIs`
//! annotation, unless `staticProvidedAPIs` is set, and its status, each only
//! when it differs from what the group holds, so that an unchanged group
//! decides no write at all.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::core::{PartialObjectMeta, PartialObjectMetaExt, ResourceExt};
use olm_api::{
    labels,
    v1::{OperatorGroup, OperatorGroupStatus},
};
use olm_runtime::effects::{Desired, Effects, StatusWrite};

use super::status::{self, Observed};

/// The effects of reconciling `group`, given what was `observed`, the APIs the
/// CSVs of its namespace provide (`provided_apis`, as the annotation spells
/// them) and the time `now`.
pub fn decide(
    group: &OperatorGroup,
    observed: &Observed,
    provided_apis: &str,
    now: &Time,
) -> Effects<OperatorGroupStatus> {
    let mut effects = Effects::none();
    let fixed = group.spec.static_provided_apis.unwrap_or(false);
    if !fixed && group.annotations().get(labels::PROVIDED_APIS).map(String::as_str) != Some(provided_apis) {
        effects.objects.push(annotation(group, provided_apis));
    }
    let next = status::compute(group, observed, now);
    if group.status.as_ref() != Some(&next) {
        effects.status = Some(StatusWrite {
            name: group.name_any(),
            status: next,
        });
    }
    effects
}

/// The `olm.providedAPIs` annotation alone, as applied to the group's
/// metadata, bound to the group's UID.
fn annotation(group: &OperatorGroup, provided_apis: &str) -> Desired {
    let meta: PartialObjectMeta<OperatorGroup> = ObjectMeta {
        name: group.metadata.name.clone(),
        namespace: group.metadata.namespace.clone(),
        annotations: Some(BTreeMap::from([(
            labels::PROVIDED_APIS.to_owned(),
            provided_apis.to_owned(),
        )])),
        ..ObjectMeta::default()
    }
    .into_request_partial::<OperatorGroup>();
    let desired = Desired::fields(&meta).expect("object metadata serializes");
    // Bound to the group read: one deleted since (with the CSVs, by an
    // uninstall) is not created again by this apply; the API server refuses
    // it (HTTP 409, the applier's `refused`).
    match group.metadata.uid.as_deref() {
        Some(uid) => desired.with_uid(uid),
        None => desired,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use olm_api::v1::OperatorGroupSpec;

    use super::*;
    use crate::controllers::operatorgroup::status::Account;

    fn group(annotation: Option<&str>, fixed: bool) -> OperatorGroup {
        let mut group = OperatorGroup::new(
            "og",
            OperatorGroupSpec {
                static_provided_apis: fixed.then_some(true),
                ..OperatorGroupSpec::default()
            },
        );
        group.metadata.namespace = Some("ns".into());
        group.metadata.generation = Some(1);
        if let Some(value) = annotation {
            group
                .annotations_mut()
                .insert(labels::PROVIDED_APIS.to_owned(), value.to_owned());
        }
        group
    }

    fn observed() -> Observed {
        Observed {
            namespaces: Ok(vec!["ns".to_owned()]),
            groups_in_namespace: 1,
            account: Account::NotNamed,
        }
    }

    fn now() -> Time {
        Time(Timestamp::from_second(1_800_000_000).unwrap())
    }

    #[test]
    fn the_annotation_is_bound_to_the_group_read() {
        let mut group = group(None, false);
        group.metadata.uid = Some("uid-og".to_owned());
        assert_eq!(annotation(&group, "Kind.v1.example.com").uid(), Some("uid-og"));
    }

    #[test]
    fn the_annotation_is_applied_only_when_it_differs_and_is_not_static() {
        let cases = [
            // (annotation held, static, provided, annotation applied)
            (None, false, "A.v1.g", true),
            (Some("A.v1.g"), false, "A.v1.g", false),
            (Some("A.v1.g"), false, "A.v1.g,B.v1.g", true),
            (Some("A.v1.g"), true, "B.v1.g", false),
            (None, true, "A.v1.g", false),
        ];
        for (held, fixed, provided, applied) in cases {
            let effects = decide(&group(held, fixed), &observed(), provided, &now());
            assert_eq!(
                effects.objects.len(),
                usize::from(applied),
                "{held:?} {fixed} {provided}"
            );
            if applied {
                let object = &effects.objects[0].object;
                assert_eq!(object.types.as_ref().unwrap().kind, "OperatorGroup");
                assert_eq!(
                    object.metadata.annotations.as_ref().unwrap()[labels::PROVIDED_APIS],
                    provided
                );
                assert_eq!(object.data, serde_json::json!({}), "metadata only, no spec");
            }
        }
    }

    #[test]
    fn an_unchanged_group_decides_no_write() {
        let mut group = group(Some("A.v1.g"), false);
        let first = decide(&group, &observed(), "A.v1.g", &now());
        let status = first.status.expect("a new group's status").status;
        group.status = Some(status);
        let again = decide(&group, &observed(), "A.v1.g", &now());
        assert!(again.is_empty(), "{again:?}");
    }
}
