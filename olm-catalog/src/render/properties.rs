//! A bundle's properties, gathered by kind and sorted as `opm render` writes them.

use std::collections::BTreeSet;

use super::error::RenderError;
use crate::{
    bundle::{BundleDir, Dependency},
    property::{Gvk, Property},
};

/// A bundle's properties by kind, in the order `opm render` writes them.
#[derive(Default)]
pub(super) struct BundleProperties {
    package: Option<Property>,
    provided: BTreeSet<Gvk>,
    required: BTreeSet<Gvk>,
    package_required: Vec<Property>,
    others: Vec<Property>,
}

impl BundleProperties {
    /// The bundle's own properties: the package, provided APIs, and others.
    pub(super) fn add_own(&mut self, own: Vec<Property>) {
        for p in own {
            match p {
                Property::Gvk(g) => {
                    self.provided.insert(g);
                }
                p @ Property::Package(_) => self.package = Some(p),
                p => self.others.push(p),
            }
        }
    }

    /// The bundle's dependencies: required APIs and packages, and others.
    pub(super) fn add_dependencies(&mut self, dependencies: &[Dependency]) {
        for d in dependencies {
            match d {
                Dependency::Gvk(g) => {
                    self.required.insert(g.clone());
                }
                Dependency::Package { .. } => self.package_required.push(d.to_property()),
                other => self.others.push(other.to_property()),
            }
        }
    }

    /// Provided APIs: every version of every CRD object, and owned API services;
    /// required APIs: the CSV's required CRDs and API services. opm refuses a
    /// bundle whose CSV owns a CRD that the bundle does not ship.
    pub(super) fn add_apis(
        &mut self,
        dir: &BundleDir,
        fail: &dyn Fn(String) -> RenderError,
    ) -> Result<(), RenderError> {
        let csv = dir.csv();
        for crd in dir.crds() {
            self.provided.extend(crd.crd_apis());
        }
        self.provided
            .extend(csv.owned_api_services().iter().map(|a| a.gvk()));
        for owned in csv.owned_crds() {
            let gvk = owned
                .gvk()
                .ok_or_else(|| fail(format!("owned CRD name {:?} is not <plural>.<group>", owned.name)))?;
            if !self.provided.contains(&gvk) {
                return Err(fail(format!(
                    "the CSV owns {gvk} ({}) but no CRD in the bundle provides it",
                    owned.name
                )));
            }
        }
        for r in csv.required_crds() {
            let gvk = r
                .gvk()
                .ok_or_else(|| fail(format!("required CRD name {:?} is not <plural>.<group>", r.name)))?;
            self.required.insert(gvk);
        }
        self.required
            .extend(csv.required_api_services().iter().map(|a| a.gvk()));
        Ok(())
    }

    /// The properties in order, sorted within their kinds.
    pub(super) fn into_properties(self) -> Vec<Property> {
        let mut properties: Vec<Property> = self.package.into_iter().collect();
        properties.extend(self.provided.into_iter().map(Property::Gvk));
        properties.extend(self.required.into_iter().map(Property::GvkRequired));
        properties.extend(self.package_required);
        properties.extend(self.others);
        sort_properties(&mut properties);
        properties
    }
}

/// Sorts by type, then by the value's JSON text, and drops exact duplicates.
pub(crate) fn sort_properties(props: &mut Vec<Property>) {
    let mut keyed: Vec<(String, Property)> = props.drain(..).map(|p| (p.value_json(), p)).collect();
    keyed.sort_by(|a, b| (a.1.type_name(), &a.0).cmp(&(b.1.type_name(), &b.0)));
    keyed.dedup_by(|a, b| a.1.type_name() == b.1.type_name() && a.0 == b.0);
    props.extend(keyed.into_iter().map(|(_, p)| p));
}
