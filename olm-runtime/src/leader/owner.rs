//! The owner of a binary's Lease: the Deployment that runs it, so that deleting the
//! Deployment also removes its Lease.
//!
//! In a cluster the manifests give each pod `POD_NAME` and `POD_NAMESPACE`; the
//! Deployment is found by the controller owner references Pod → ReplicaSet →
//! Deployment. Outside a cluster, without those variables, without the RBAC to
//! read the Pod and ReplicaSet, or with the Lease in another namespace (an owner
//! must be in the Lease's namespace), the Lease has no owner: that is logged at
//! debug level and never fails the binary.

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, ReplicaSet},
        core::v1::Pod,
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{Api, Client, Resource};

/// The controller owner of `meta` if it is of kind `K` (apiVersion and kind match).
fn controller_of<K: Resource<DynamicType = ()>>(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_deref()?
        .iter()
        .find(|owner| owner.controller == Some(true))
        .filter(|owner| owner.kind == K::kind(&()) && owner.api_version == K::api_version(&()))
}

/// The name of the ReplicaSet that controls `pod`, if one does.
pub fn replica_set_of(pod: &Pod) -> Option<&str> {
    controller_of::<ReplicaSet>(&pod.metadata).map(|owner| owner.name.as_str())
}

/// An owner reference to the Deployment that controls `replica_set`, which must be
/// the ReplicaSet controlling `pod` (same name and UID): the Lease's owner. It is
/// not a controller reference (the Deployment does not manage Leases) and does not
/// block the Deployment's deletion.
pub fn lease_owner(pod: &Pod, replica_set: &ReplicaSet) -> Option<OwnerReference> {
    let expected = controller_of::<ReplicaSet>(&pod.metadata)?;
    let same = replica_set.metadata.name.as_deref() == Some(expected.name.as_str())
        && replica_set.metadata.uid.as_deref() == Some(expected.uid.as_str());
    if !same {
        return None;
    }
    let deployment = controller_of::<Deployment>(&replica_set.metadata)?;
    Some(OwnerReference {
        api_version: deployment.api_version.clone(),
        kind: deployment.kind.clone(),
        name: deployment.name.clone(),
        uid: deployment.uid.clone(),
        controller: None,
        block_owner_deletion: None,
    })
}

/// Where this process runs, from `POD_NAME` and `POD_NAMESPACE`.
fn this_pod() -> Option<(String, String)> {
    let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
    Some((var("POD_NAMESPACE")?, var("POD_NAME")?))
}

/// The owner reference for a Lease in `lease_namespace`: the Deployment running
/// this pod, when it can be found (see the [module docs](self)).
pub async fn find_lease_owner(client: &Client, lease_namespace: &str) -> Option<OwnerReference> {
    let Some((namespace, pod_name)) = this_pod() else {
        tracing::debug!("POD_NAME or POD_NAMESPACE is not set: the Lease gets no owner");
        return None;
    };
    if namespace != lease_namespace {
        tracing::debug!(
            pod_namespace = %namespace,
            lease_namespace,
            "the Lease is not in this pod's namespace: it gets no owner"
        );
        return None;
    }
    let found = async {
        let pod = Api::<Pod>::namespaced(client.clone(), &namespace)
            .get(&pod_name)
            .await?;
        let Some(replica_set) = replica_set_of(&pod) else {
            return Ok(None);
        };
        let replica_set = Api::<ReplicaSet>::namespaced(client.clone(), &namespace)
            .get(replica_set)
            .await?;
        Ok::<_, kube::Error>(lease_owner(&pod, &replica_set))
    }
    .await;
    match found {
        Ok(Some(owner)) => Some(owner),
        Ok(None) => {
            tracing::debug!(pod = %pod_name, "this pod is not run by a Deployment: the Lease gets no owner");
            None
        }
        Err(error) => {
            tracing::debug!(
                pod = %pod_name,
                error = &error as &dyn std::error::Error,
                "cannot read this pod's owners (RBAC: get pods and replicasets): the Lease gets no owner"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(api_version: &str, kind: &str, name: &str, uid: &str, controller: bool) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            controller: Some(controller),
            block_owner_deletion: Some(true),
        }
    }

    fn meta(name: &str, uid: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            uid: Some(uid.into()),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        }
    }

    fn pod(owners: Vec<OwnerReference>) -> Pod {
        Pod {
            metadata: meta("olm-operator-7d9f-abcde", "pod-uid", owners),
            ..Pod::default()
        }
    }

    fn replica_set(name: &str, uid: &str, owners: Vec<OwnerReference>) -> ReplicaSet {
        ReplicaSet {
            metadata: meta(name, uid, owners),
            ..ReplicaSet::default()
        }
    }

    #[test]
    fn pod_replicaset_deployment_gives_the_deployment() {
        let pod = pod(vec![owner(
            "apps/v1",
            "ReplicaSet",
            "olm-operator-7d9f",
            "rs-uid",
            true,
        )]);
        assert_eq!(replica_set_of(&pod), Some("olm-operator-7d9f"));
        let rs = replica_set(
            "olm-operator-7d9f",
            "rs-uid",
            vec![owner("apps/v1", "Deployment", "olm-operator", "dep-uid", true)],
        );
        assert_eq!(
            lease_owner(&pod, &rs),
            Some(OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: "olm-operator".into(),
                uid: "dep-uid".into(),
                controller: None,
                block_owner_deletion: None,
            })
        );
    }

    #[test]
    fn anything_else_gives_no_owner() {
        let deployment = || vec![owner("apps/v1", "Deployment", "olm-operator", "dep-uid", true)];
        // A bare pod, or one run by something else (a StatefulSet, a Job).
        assert_eq!(replica_set_of(&pod(vec![])), None);
        assert_eq!(
            replica_set_of(&pod(vec![owner("apps/v1", "StatefulSet", "s", "u", true)])),
            None
        );
        // An owner that is not the controller does not count.
        let loose = pod(vec![owner("apps/v1", "ReplicaSet", "rs", "rs-uid", false)]);
        assert_eq!(replica_set_of(&loose), None);
        assert_eq!(
            lease_owner(&loose, &replica_set("rs", "rs-uid", deployment())),
            None
        );

        let pod = pod(vec![owner("apps/v1", "ReplicaSet", "rs", "rs-uid", true)]);
        // A ReplicaSet of the same name but another UID (recreated meanwhile).
        assert_eq!(
            lease_owner(&pod, &replica_set("rs", "other-uid", deployment())),
            None
        );
        // A ReplicaSet made by hand, or by something other than a Deployment.
        assert_eq!(lease_owner(&pod, &replica_set("rs", "rs-uid", vec![])), None);
        assert_eq!(
            lease_owner(
                &pod,
                &replica_set(
                    "rs",
                    "rs-uid",
                    vec![owner("example.com/v1", "Deployment", "d", "u", true)]
                )
            ),
            None
        );
    }
}
