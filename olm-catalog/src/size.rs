//! An estimate of the heap memory a catalog holds: the capacity of every string and vector and the
//! length of every kept JSON text, following the model's own fields. Allocator overhead is not
//! counted. Meant for metrics and benchmarks (how much a catalog snapshot costs), not accounting.

use std::mem::size_of;

use crate::{
    model::{Bundle, Catalog, Channel, ChannelEntry, Deprecation, Meta, Package, RelatedImage},
    property::Property,
    version::Version,
};

fn s(v: &String) -> usize {
    v.capacity()
}

fn os(v: &Option<String>) -> usize {
    v.as_ref().map_or(0, String::capacity)
}

fn vec<T>(v: &Vec<T>, each: impl Fn(&T) -> usize) -> usize {
    v.capacity() * size_of::<T>() + v.iter().map(each).sum::<usize>()
}

fn version(v: &Version) -> usize {
    // semver keeps identifiers of up to 8 bytes inline.
    let ident = |t: &str| {
        if t.len() > 8 {
            t.len() + size_of::<usize>()
        } else {
            0
        }
    };
    v.as_str().len()
        + v.semver()
            .map_or(0, |sv| ident(sv.pre.as_str()) + ident(sv.build.as_str()))
}

fn property(p: &Property) -> usize {
    match p {
        Property::Package(p) => s(&p.package_name) + version(&p.version) + os(&p.release),
        Property::PackageRequired(p) => s(&p.package_name) + s(&p.version_range),
        Property::Gvk(g) | Property::GvkRequired(g) => s(&g.group) + s(&g.kind) + s(&g.version),
        Property::Label(l) | Property::LabelRequired(l) => s(l),
        Property::Constraint(c) => os(&c.failure_message) + c.value.get().len(),
        Property::BundleObject(o) => s(&o.data),
        Property::CsvMetadata(r) | Property::Deprecated(r) => r.get().len(),
        Property::Channel(c) => s(&c.channel_name) + os(&c.replaces),
        Property::Other { type_, value } => s(type_) + value.get().len(),
    }
}

fn props(v: &Vec<Property>) -> usize {
    vec(v, property)
}

fn package(p: &Package) -> usize {
    s(&p.name)
        + os(&p.default_channel)
        + p.icon.as_ref().map_or(0, |i| s(&i.base64data) + s(&i.mediatype))
        + os(&p.description)
        + props(&p.properties)
}

fn entry(e: &ChannelEntry) -> usize {
    s(&e.name) + os(&e.replaces) + vec(&e.skips, s) + os(&e.skip_range)
}

fn channel(c: &Channel) -> usize {
    s(&c.name) + s(&c.package) + vec(&c.entries, entry) + props(&c.properties)
}

fn related(r: &RelatedImage) -> usize {
    s(&r.name) + s(&r.image)
}

fn bundle(b: &Bundle) -> usize {
    s(&b.name) + s(&b.package) + s(&b.image) + props(&b.properties) + vec(&b.related_images, related)
}

fn deprecation(d: &Deprecation) -> usize {
    s(&d.package)
        + vec(&d.entries, |e| {
            s(&e.reference.schema) + os(&e.reference.name) + s(&e.message)
        })
}

fn meta(m: &Meta) -> usize {
    s(&m.schema) + os(&m.package) + os(&m.name) + m.blob.get().len()
}

impl Catalog {
    /// Estimated heap bytes held by the catalog (see the [module docs](crate::size)).
    pub fn heap_size(&self) -> usize {
        vec(&self.packages, package)
            + vec(&self.channels, channel)
            + vec(&self.bundles, bundle)
            + vec(&self.deprecations, deprecation)
            + vec(&self.others, meta)
    }
}

#[cfg(test)]
mod tests {
    use crate::fbc::parse_str;

    #[test]
    fn heap_size_counts_strings_and_vectors() {
        let small = parse_str("a.yaml", "schema: olm.package\nname: p\n").unwrap();
        let big = parse_str(
            "a.yaml",
            &format!(
                "schema: olm.package\nname: p\ndescription: \"{}\"\n",
                "x".repeat(10_000)
            ),
        )
        .unwrap();
        assert!(small.heap_size() > 0);
        assert!(big.heap_size() >= small.heap_size() + 10_000);
    }
}
