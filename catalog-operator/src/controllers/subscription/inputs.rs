//! What a sync of a namespace reads.

use std::{collections::HashMap, sync::Arc};

use olm_api::{
    v1::OLMConfig,
    v1alpha1::{ClusterServiceVersion, InstallPlan, Subscription},
};
use olm_resolver::model::CatalogId;

use crate::{catalogs::CatalogState, images::unpack::UnpackPolicy};

/// What the stores hold for one namespace: the input of a sync.
pub struct NamespaceInputs {
    /// The namespace.
    pub namespace: String,
    /// Its Subscriptions not being deleted, by name.
    pub subscriptions: Vec<Arc<Subscription>>,
    /// Its CSVs, copied CSVs excluded.
    pub csvs: Vec<Arc<ClusterServiceVersion>>,
    /// Its InstallPlans, with those this replica created that the store has not
    /// shown yet.
    pub plans: Vec<Arc<InstallPlan>>,
    /// The catalogs it may use, with their state.
    pub catalogs: Vec<(CatalogId, CatalogState)>,
    /// UIDs of the CatalogSources, for references.
    pub catalog_uids: HashMap<CatalogId, String>,
    /// How its bundle images are unpacked: set by the annotations of its one
    /// OperatorGroup.
    pub unpack_policy: UnpackPolicy,
    /// OLMConfig `cluster`, when there is one: the default of automatic rollback.
    pub olm_config: Option<Arc<OLMConfig>>,
    /// Changes whenever any of the above (or any catalog) changes.
    pub fingerprint: u64,
}
