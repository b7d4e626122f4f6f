//! The work the chaos campaign gives the operators: in each of its namespaces, in turn, an install
//! of demo-app (Automatic or Manual, at the newest version or from an older starting CSV, which
//! makes an upgrade), the approval of its InstallPlans, and its uninstall. [`snapshot`] reads what
//! the invariants check.

use std::collections::BTreeMap;

use k8s_openapi::api::{apps::v1::Deployment, core::v1::Namespace};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use olm_api::{
    v1::OperatorGroup,
    v1alpha1::{ClusterServiceVersion, InstallPlan, Subscription},
};
use olm_testkit::{NAMESPACE_LABEL, create_namespace, objects::apply_json};
use serde_json::{Value, json};

use super::{
    invariants::{Expect, Snapshot},
    rng::Rng,
};

/// The campaign's namespaces and where each one's work should lead it.
pub struct Work {
    /// Per namespace, what it should converge to.
    pub expected: BTreeMap<String, Expect>,
    /// The catalog's namespace.
    home: String,
}

impl Work {
    /// `count` namespaces `home-0`.., each with an OperatorGroup that targets it alone.
    pub async fn new(client: &Client, home: &str, count: usize) -> Work {
        let mut expected = BTreeMap::new();
        for i in 0..count {
            let ns = format!("{home}-{i}");
            create_namespace(client, &ns, &[(NAMESPACE_LABEL, "chaos")]).await;
            let groups: Api<OperatorGroup> = Api::namespaced(client.clone(), &ns);
            apply_json(
                &groups,
                json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                       "metadata": {"name": "own"}, "spec": {"targetNamespaces": [ns]}}),
            )
            .await;
            expected.insert(ns, Expect::Empty);
        }
        Work {
            expected,
            home: home.to_owned(),
        }
    }

    /// One step of work in a namespace drawn from `rng`; says what it did.
    pub async fn step(&mut self, client: &Client, rng: &mut Rng) -> String {
        let names: Vec<String> = self.expected.keys().cloned().collect();
        let ns = rng.pick(&names).clone();
        let result = match self.expected[&ns] {
            Expect::Empty => self.install(client, &ns, rng).await,
            Expect::Latest => uninstall(client, &ns).await,
            Expect::LatestOrApproval => match approve(client, &ns).await {
                Ok(Some(plan)) => Ok((Expect::LatestOrApproval, format!("approve {plan}"))),
                Ok(None) => uninstall(client, &ns).await,
                Err(e) => Err(e),
            },
        };
        match result {
            Ok((expect, what)) => {
                self.expected.insert(ns.clone(), expect);
                format!("{ns}: {what}")
            }
            Err(e) => format!("{ns}: step refused by the API server ({e}), retried next time"),
        }
    }

    /// Subscribes to demo-app in `ns`: Automatic or Manual, from the newest or an older CSV.
    async fn install(&self, client: &Client, ns: &str, rng: &mut Rng) -> kube::Result<(Expect, String)> {
        let manual = rng.chance(50);
        let upgrade = rng.chance(50);
        let approval = if manual { "Manual" } else { "Automatic" };
        let mut spec = json!({"source": "demo", "sourceNamespace": self.home, "name": "demo-app",
                              "channel": "stable", "installPlanApproval": approval});
        if upgrade {
            spec["startingCSV"] = json!("demo-app.v0.1.0");
        }
        let sub: Subscription = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "demo-app"}, "spec": spec}))
        .expect("a Subscription");
        Api::<Subscription>::namespaced(client.clone(), ns)
            .patch(
                "demo-app",
                &PatchParams::apply(olm_testkit::FIELD_MANAGER).force(),
                &Patch::Apply(&sub),
            )
            .await?;
        let from = if upgrade {
            "from v0.1.0 (upgrade)"
        } else {
            "at the newest"
        };
        let what = format!("install {approval} {from}");
        Ok((
            if manual {
                Expect::LatestOrApproval
            } else {
                Expect::Latest
            },
            what,
        ))
    }

    /// Deletes the namespaces.
    pub async fn delete(&self, client: &Client, home: &str) {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        for ns in self.expected.keys().map(String::as_str).chain([home]) {
            let _ = namespaces.delete(ns, &DeleteParams::background()).await;
        }
    }
}

/// Approves the InstallPlan that waits for it in `ns`, if any; returns its name.
async fn approve(client: &Client, ns: &str) -> kube::Result<Option<String>> {
    let plans: Api<InstallPlan> = Api::namespaced(client.clone(), ns);
    for plan in plans.list(&ListParams::default()).await?.items {
        let value = serde_json::to_value(&plan).unwrap_or_default();
        if value.pointer("/status/phase").and_then(Value::as_str) == Some("RequiresApproval") {
            let name = plan.name_any();
            plans
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"approved": true}})),
                )
                .await?;
            return Ok(Some(name));
        }
    }
    Ok(None)
}

/// Uninstalls in `ns` as a user does: the Subscriptions, then the CSVs.
async fn uninstall(client: &Client, ns: &str) -> kube::Result<(Expect, String)> {
    let subs: Api<Subscription> = Api::namespaced(client.clone(), ns);
    subs.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    let csvs: Api<ClusterServiceVersion> = Api::namespaced(client.clone(), ns);
    for csv in csvs.list(&ListParams::default()).await?.items {
        if !csv.labels().contains_key(olm_api::labels::COPIED_FROM) {
            csvs.delete(&csv.name_any(), &DeleteParams::default()).await?;
        }
    }
    Ok((Expect::Empty, "uninstall".to_owned()))
}

/// What the invariants read, in the `namespaces`.
pub async fn snapshot<'a>(
    client: &Client,
    namespaces: impl Iterator<Item = &'a String>,
) -> kube::Result<Snapshot> {
    let mut snapshot = Snapshot::default();
    for ns in namespaces {
        snapshot
            .subscriptions
            .extend(list::<Subscription>(client, ns).await?);
        snapshot
            .csvs
            .extend(list::<ClusterServiceVersion>(client, ns).await?);
        snapshot.plans.extend(list::<InstallPlan>(client, ns).await?);
        snapshot.deployments.extend(list::<Deployment>(client, ns).await?);
    }
    Ok(snapshot)
}

async fn list<K>(client: &Client, ns: &str) -> kube::Result<Vec<Value>>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + serde::Serialize,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let items = api.list(&ListParams::default()).await?.items;
    Ok(items
        .iter()
        .filter_map(|o| serde_json::to_value(o).ok())
        .collect())
}
