//! Resolution of one namespace against the catalog store: the pure resolution
//! lives in `olm-resolution` (so that no client of it depends on this operator);
//! here its view is bound to the store's catalogs ([`CatalogState`]).

pub use olm_resolution::{
    Decision, GroupDecision, Target, catalog_of, decide, installed_csvs, is_copied, resolver_subscriptions,
};

use crate::catalogs::CatalogState;

/// What one namespace holds, with the catalogs of the store.
pub type NamespaceView<'a> = olm_resolution::NamespaceView<'a, CatalogState>;

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use kube::api::ObjectMeta;
    use olm_api::v1alpha1::{ClusterServiceVersionSpec, SubscriptionSpec, SubscriptionStatus};

    use std::sync::Arc;

    use olm_api::{
        labels,
        v1alpha1::{Approval, ClusterServiceVersion, Subscription},
    };
    use olm_resolver::{model::CatalogId, plan::Change};

    use super::*;
    use crate::catalogs::{CatalogContent, CatalogStore};

    pub(crate) fn demo_store() -> (CatalogStore, CatalogId) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../catalogs/demo-bundles");
        let catalog = crate::source::load(&path).expect("demo").0;
        let id = CatalogId::new("demo", "team");
        let store = CatalogStore::new();
        let now = olm_runtime::conditions::now();
        store.set_loaded(
            &id,
            0,
            CatalogContent::new(
                id.clone(),
                catalog,
                Vec::new(),
                crate::bundles::BundleSource::Memory,
            ),
            &now,
        );
        (store, id)
    }

    pub(crate) fn subscription(name: &str, package: &str, approval: Approval) -> Arc<Subscription> {
        Arc::new(Subscription {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("team".into()),
                ..ObjectMeta::default()
            },
            spec: SubscriptionSpec {
                catalog_source: "demo".into(),
                catalog_source_namespace: "team".into(),
                package: package.into(),
                channel: Some("stable".into()),
                starting_csv: None,
                install_plan_approval: Some(approval),
                config: None,
            },
            status: None,
        })
    }

    fn csv(name: &str, version: &str) -> Arc<ClusterServiceVersion> {
        let spec: ClusterServiceVersionSpec = serde_json::from_value(serde_json::json!({
            "version": version,
            "displayName": name,
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
            "customresourcedefinitions": {"owned": [
                {"name": "databases.demo.olm-rs.dev", "version": "v1", "kind": "Database"}
            ]},
        }))
        .expect("a CSV spec");
        Arc::new(ClusterServiceVersion {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("team".into()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        })
    }

    #[test]
    fn groups_get_their_own_decisions() {
        let (store, _) = demo_store();
        let catalogs = store.visible(&["team"], &[]);
        let index = store.index(&catalogs);
        let subs = vec![
            subscription("app", "demo-app", Approval::Automatic),
            subscription("broken", "demo-broken", Approval::Automatic),
        ];
        let view = NamespaceView {
            namespace: "team",
            subscriptions: &subs,
            csvs: &[],
            catalogs: &catalogs,
        };
        let decisions = decide(&index, &view);
        assert_eq!(decisions.len(), 2);
        let app = decisions.iter().find(|d| d.subscriptions == ["app"]).unwrap();
        let Decision::Install(steps) = &app.decision else {
            panic!("{:?}", app.decision)
        };
        let order: Vec<_> = steps.iter().map(|s| (s.bundle.as_str(), s.dependency)).collect();
        assert_eq!(order, [("demo-db.v1.1.0", true), ("demo-app.v0.2.0", false)]);
        assert_eq!(app.targets["app"].bundle, "demo-app.v0.2.0");
        let broken = decisions.iter().find(|d| d.subscriptions == ["broken"]).unwrap();
        let Decision::Unsatisfiable(message) = &broken.decision else {
            panic!("{:?}", broken.decision)
        };
        assert!(message.contains("demo-missing"), "{message}");
    }

    #[test]
    fn installed_bundles_are_up_to_date_and_manual_groups_are_manual() {
        let (store, _) = demo_store();
        let catalogs = store.visible(&["team"], &[]);
        let index = store.index(&catalogs);
        let mut db = subscription("db", "demo-db", Approval::Manual);
        Arc::make_mut(&mut db).status = Some(SubscriptionStatus {
            installed_csv: Some("demo-db.v1.1.0".into()),
            ..SubscriptionStatus::default()
        });
        let subs = vec![db, subscription("app", "demo-app", Approval::Automatic)];
        let csvs = vec![csv("demo-db.v1.1.0", "1.1.0")];
        let view = NamespaceView {
            namespace: "team",
            subscriptions: &subs,
            csvs: &csvs,
            catalogs: &catalogs,
        };
        let decisions = decide(&index, &view);
        assert_eq!(decisions.len(), 1, "app needs db: one group");
        let group = &decisions[0];
        assert_eq!(group.approval, Approval::Manual);
        let Decision::Install(steps) = &group.decision else {
            panic!("{:?}", group.decision)
        };
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(steps[0].bundle, "demo-app.v0.2.0");
        assert_eq!(group.targets["db"].change, Change::Stay);
    }

    #[test]
    fn installed_csvs_bring_their_needs() {
        let (store, _) = demo_store();
        let catalogs = store.visible(&["team"], &[]);
        let mut app = csv("demo-app.v0.1.0", "0.1.0");
        let spec = &mut Arc::make_mut(&mut app).spec;
        spec.custom_resource_definitions = serde_json::from_value(serde_json::json!({"required": [
            {"name": "databases.demo.olm-rs.dev", "version": "v1", "kind": "Database"},
            {"name": "caches.demo.olm-rs.dev", "version": "v1", "kind": "Cache"}
        ]}))
        .expect("required CRDs");
        Arc::make_mut(&mut app).metadata.annotations = Some(
            [(
                labels::INSTALLED_PROPERTIES.to_owned(),
                serde_json::json!({"properties": [
                    {"type": "olm.package", "value": {"packageName": "demo-app", "version": "0.1.0"}},
                    {"type": "olm.package.required", "value": {"packageName": "demo-db", "versionRange": ">=1.1.0 <2.0.0"}},
                    {"type": "olm.gvk.required", "value": {"group": "demo.olm-rs.dev", "version": "v1", "kind": "Database"}},
                    {"type": "olm.constraint", "value": {"failureMessage": "no red", "not": {"constraints": [{"package": {"packageName": "red"}}]}}},
                    {"type": "olm.package.required", "value": {"packageName": "bad", "versionRange": "^1"}}
                ]})
                .to_string(),
            )]
            .into(),
        );
        let installed = installed_csvs(&[app], &catalogs);
        let described: Vec<String> = installed[0]
            .requirements
            .iter()
            .map(olm_resolver::describe_requirement)
            .collect();
        assert_eq!(
            described,
            [
                "package demo-db in range >=1.1.0 <2.0.0",
                "API demo.olm-rs.dev/v1 Database",
                "olm.constraint none of [package red]",
                "API demo.olm-rs.dev/v1 Cache (a required CRD of its CSV)",
            ],
            "a range that does not parse is left out; a required CRD named by a property counts once"
        );
    }

    #[test]
    fn a_replaced_csv_gives_way_to_its_replacement() {
        let (store, _) = demo_store();
        let catalogs = store.visible(&["team"], &[]);
        let index = store.index(&catalogs);
        let mut db = subscription("db", "demo-db", Approval::Automatic);
        Arc::make_mut(&mut db).status = Some(SubscriptionStatus {
            installed_csv: Some("demo-db.v1.0.0".into()),
            ..SubscriptionStatus::default()
        });
        let mut new = csv("demo-db.v1.1.0", "1.1.0");
        Arc::make_mut(&mut new).spec.replaces = Some("demo-db.v1.0.0".into());
        let csvs = vec![csv("demo-db.v1.0.0", "1.0.0"), new];
        let installed = installed_csvs(&csvs, &catalogs);
        assert_eq!(installed.len(), 1, "the replaced CSV is left out");
        let subs = vec![db];
        let view = NamespaceView {
            namespace: "team",
            subscriptions: &subs,
            csvs: &csvs,
            catalogs: &catalogs,
        };
        let decisions = decide(&index, &view);
        assert_eq!(decisions[0].decision, Decision::UpToDate, "{:?}", decisions[0]);
        assert_eq!(decisions[0].targets["db"].bundle, "demo-db.v1.1.0");
    }
}
