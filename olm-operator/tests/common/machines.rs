//! What the MachinePool cluster tests share: the admission policies that keep
//! agents to their own objects, applied as `manifests/machine-agent-policy.yaml`
//! has them.

use std::time::Duration;

use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams},
};

/// Applies the admission policies that keep each agent to its own objects.
pub async fn install_policy() {
    let path = olm_testkit::repo_root().join("manifests/machine-agent-policy.yaml");
    let text = std::fs::read_to_string(&path).expect("the policy manifest");
    // Server-side apply with the client: no kubectl needed, and the same field
    // manager every time, so a second test process takes the objects over.
    let client = super::client().await;
    for doc in text.split("\n---\n") {
        let object: serde_json::Value = serde_saphyr::from_str(doc).expect("YAML");
        let object = olm_testkit::dynamic(object, "policy");
        let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
        let resource = kube::discovery::ApiResource {
            group: "admissionregistration.k8s.io".to_owned(),
            version: "v1".to_owned(),
            api_version: "admissionregistration.k8s.io/v1".to_owned(),
            plural: format!("{}s", kind.to_lowercase()).replace("policys", "policies"),
            kind,
        };
        let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &resource);
        api.patch(
            &object.name_any(),
            &PatchParams::apply("olm-rs-tests").force(),
            &Patch::Apply(&object),
        )
        .await
        .expect("the policy applies");
    }
    // The API server compiles a new policy before enforcing it.
    tokio::time::sleep(Duration::from_secs(2)).await;
}
