//! Small builders for resolver fixtures.
#![allow(dead_code)]

use olm_resolver::{
    CatalogIndex,
    model::*,
    plan::{Outcome, Plan, Resolution},
    range::VersionRange,
};

pub const NS: &str = "team-a";

pub fn v(text: &str) -> BundleVersion {
    BundleVersion::parse(text).unwrap()
}

/// An API of group `example.com`, version `v1`.
pub fn api(kind: &str) -> Gvk {
    Gvk::new("example.com", "v1", kind)
}

/// A bundle plus its channel entry; the package is the name up to `.v`.
#[derive(Clone)]
pub struct B {
    pub bundle: BundleInput,
    pub entry: ChannelEntry,
}

pub fn b(name: &str, version: &str) -> B {
    let package = name.split(".v").next().unwrap();
    B {
        bundle: BundleInput::new(name, package, v(version)),
        entry: ChannelEntry::new(name),
    }
}

impl B {
    pub fn replaces(mut self, name: &str) -> B {
        self.entry = self.entry.replaces(name);
        self
    }
    pub fn skips(mut self, name: &str) -> B {
        self.entry = self.entry.skips(name);
        self
    }
    pub fn skip_range(mut self, range: &str) -> B {
        self.entry = self.entry.skip_range(VersionRange::parse(range).unwrap());
        self
    }
    pub fn provides(mut self, kind: &str) -> B {
        self.bundle = self.bundle.provides(api(kind));
        self
    }
    pub fn requires_api(mut self, kind: &str) -> B {
        self.bundle = self.bundle.requires(Requirement::gvk(api(kind)));
        self
    }
    pub fn requires_crd(mut self, kind: &str) -> B {
        self.bundle = self.bundle.requires(Requirement::csv_required_crd(api(kind)));
        self
    }
    pub fn requires_package(mut self, package: &str, range: &str) -> B {
        self.bundle = self
            .bundle
            .requires(Requirement::package(package, range).unwrap());
        self
    }
    pub fn constraint(mut self, json: serde_json::Value) -> B {
        self.bundle = self
            .bundle
            .requires(Requirement::Constraint(Constraint::from_json(&json).unwrap()));
        self
    }
    pub fn deprecated(mut self, message: &str) -> B {
        self.bundle.deprecation = Some(Deprecation::new(message));
        self
    }
}

pub struct Cat(pub CatalogSnapshot);

/// A catalog in namespace `olm`, priority 0.
pub fn cat(name: &str) -> Cat {
    Cat(CatalogSnapshot {
        id: CatalogId::new(name, "olm"),
        priority: 0,
        packages: Vec::new(),
        bundles: Vec::new(),
    })
}

impl Cat {
    pub fn priority(mut self, priority: i32) -> Cat {
        self.0.priority = priority;
        self
    }
    pub fn namespace(mut self, namespace: &str) -> Cat {
        self.0.id.namespace = namespace.to_owned();
        self
    }
    /// Adds a channel; the package's first channel becomes its default channel.
    pub fn channel(mut self, package: &str, channel: &str, entries: Vec<B>) -> Cat {
        if !self.0.packages.iter().any(|p| p.name == package) {
            self.0
                .packages
                .push(PackageInput::new(package, Some(channel), Vec::new()));
        }
        let mut channel = ChannelInput::new(channel, Vec::new());
        for b in entries {
            if !self.0.bundles.iter().any(|x| x.name == b.bundle.name) {
                self.0.bundles.push(b.bundle.clone());
            }
            channel.entries.push(b.entry);
        }
        self.0
            .packages
            .iter_mut()
            .find(|p| p.name == package)
            .unwrap()
            .channels
            .push(channel);
        self
    }
    pub fn default_channel(mut self, package: &str, channel: &str) -> Cat {
        self.0
            .packages
            .iter_mut()
            .find(|p| p.name == package)
            .unwrap()
            .default_channel = Some(channel.to_owned());
        self
    }
    pub fn id(&self) -> CatalogId {
        self.0.id.clone()
    }
}

pub fn index(catalogs: Vec<Cat>) -> CatalogIndex {
    CatalogIndex::new(catalogs.into_iter().map(|c| c.0).collect())
}

/// A Subscription in [`NS`] to `package` from catalog `catalog` (namespace `olm`).
pub fn sub(name: &str, package: &str, catalog: &str) -> Subscription {
    Subscription::new(name, NS, package, CatalogId::new(catalog, "olm"))
}

/// An installed CSV whose package is the name up to `.v`.
pub fn installed(name: &str, version: &str) -> InstalledCsv {
    InstalledCsv::new(name, Some(name.split(".v").next().unwrap()), v(version))
}

pub fn resolve(index: &CatalogIndex, installed: &[InstalledCsv], subs: &[Subscription]) -> Resolution {
    index.resolve(NS, installed, subs)
}

/// The plan of the group holding `subscription`; panics with the explanation if there is none.
pub fn plan<'a>(resolution: &'a Resolution, subscription: &str) -> &'a Plan {
    match &resolution.group_of(subscription).expect("no such group").outcome {
        Outcome::Plan(plan) => plan,
        Outcome::Unsatisfiable(e) => panic!("expected a plan for {subscription}, got:\n{e}"),
    }
}

/// The explanation of the group holding `subscription`, as text.
pub fn explanation(resolution: &Resolution, subscription: &str) -> String {
    match &resolution.group_of(subscription).expect("no such group").outcome {
        Outcome::Plan(plan) => panic!("expected no plan for {subscription}, got {plan:#?}"),
        Outcome::Unsatisfiable(e) => e.to_string(),
    }
}

/// Step bundle names, in install order.
pub fn steps(plan: &Plan) -> Vec<&str> {
    plan.steps.iter().map(|s| s.bundle.as_str()).collect()
}
