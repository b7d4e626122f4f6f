//! `olm.template.basic`, the catalog template of the community pipeline: a blob whose `entries`
//! are catalog blobs, except that bundles are named by image only. The FBC loader keeps such
//! blobs as [`Meta`]; [`BasicTemplate::from_meta`] reads one, and [`BasicTemplate::expand`] turns it
//! into a catalog given a way to render a bundle image (pulling images is not this crate's job).

use serde_json::Value;

use crate::{
    fbc::{self, Blob},
    model::{Bundle, Catalog, Meta, schema},
};

/// A parsed `olm.template.basic` blob.
#[derive(Debug, Clone, PartialEq)]
pub struct BasicTemplate {
    /// The package, channel, deprecation and other blobs of the template, and any bundle given in
    /// full.
    pub catalog: Catalog,
    /// Images of the bundles given by image only, in template order.
    pub bundle_images: Vec<String>,
}

impl BasicTemplate {
    /// Reads a template blob; the message says which entry is wrong.
    pub fn from_meta(meta: &Meta) -> Result<Self, String> {
        if meta.schema != schema::TEMPLATE_BASIC {
            return Err(format!(
                "schema is {:?}, not {}",
                meta.schema,
                schema::TEMPLATE_BASIC
            ));
        }
        let value = meta.blob.to_value();
        let entries = value
            .get("entries")
            .and_then(Value::as_array)
            .ok_or("the template has no `entries` list")?;
        let mut out = Self {
            catalog: Catalog::default(),
            bundle_images: Vec::new(),
        };
        for (i, e) in entries.iter().enumerate() {
            let image_only =
                e.get("schema").and_then(Value::as_str) == Some(schema::BUNDLE) && e.get("name").is_none();
            if image_only {
                let image = e.get("image").and_then(Value::as_str).filter(|s| !s.is_empty());
                out.bundle_images.push(
                    image
                        .ok_or(format!("entries[{i}]: bundle without name or image"))?
                        .to_owned(),
                );
                continue;
            }
            out.catalog
                .push(fbc::parse_blob(e.clone()).map_err(|m| format!("entries[{i}]: {m}"))?);
        }
        Ok(out)
    }

    /// The templates among a catalog's blobs of unknown schema, with the errors of those that do
    /// not parse.
    pub fn all_in(catalog: &Catalog) -> Vec<Result<Self, String>> {
        catalog
            .others
            .iter()
            .filter(|m| m.schema == schema::TEMPLATE_BASIC)
            .map(Self::from_meta)
            .collect()
    }

    /// The catalog the template stands for: `render` gives the bundle of each image.
    pub fn expand<E>(self, mut render: impl FnMut(&str) -> Result<Bundle, E>) -> Result<Catalog, E> {
        let mut catalog = self.catalog;
        for image in &self.bundle_images {
            catalog.push(Blob::Bundle(render(image)?));
        }
        Ok(catalog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fbc::parse_str;

    #[test]
    fn expands_with_a_renderer() {
        let text = r#"
schema: olm.template.basic
entries:
  - {schema: olm.package, name: foo, defaultChannel: stable}
  - {schema: olm.channel, name: stable, package: foo, entries: [{name: foo.v1}]}
  - {schema: olm.bundle, image: "quay.io/foo/bundle:v1"}
"#;
        let c = parse_str("t.yaml", text).unwrap();
        let templates = BasicTemplate::all_in(&c);
        let t = templates.into_iter().next().unwrap().unwrap();
        assert_eq!(t.bundle_images, ["quay.io/foo/bundle:v1"]);
        let expanded = t
            .expand(|image| {
                Ok::<_, String>(Bundle {
                    name: "foo.v1".into(),
                    package: "foo".into(),
                    image: image.into(),
                    properties: Vec::new(),
                    related_images: Vec::new(),
                })
            })
            .unwrap();
        assert_eq!(
            (
                expanded.packages.len(),
                expanded.channels.len(),
                expanded.bundles.len()
            ),
            (1, 1, 1)
        );

        let bad = parse_str(
            "t.yaml",
            "schema: olm.template.basic\nentries:\n- {schema: olm.bundle}\n",
        )
        .unwrap();
        let err = BasicTemplate::from_meta(&bad.others[0]).unwrap_err();
        assert_eq!(err, "entries[0]: bundle without name or image");
    }
}
