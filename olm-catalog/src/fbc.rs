//! File-based catalogs (FBC): loading JSON streams and YAML documents from files and directory
//! trees as `opm` does, and writing a catalog back as a deterministic JSON stream.
//!
//! A directory is walked recursively; every file ending in `.json`, `.yaml` or `.yml` is read, and
//! its kind is told by content (a file starting with `{` is a JSON stream, anything else YAML).
//! Blobs of unknown schemas, such as `olm.template.basic` templates, are kept as [`Meta`].

use std::{
    collections::BTreeSet,
    io,
    path::{Path, PathBuf},
};

use serde_json::{Map, Value};

use crate::{
    docs,
    error::{LoadError, Position},
    model::{
        Bundle, Catalog, Channel, ChannelEntry, Deprecation, DeprecationEntry, DeprecationReference, Icon,
        Meta, Package, RelatedImage, schema,
    },
    property::{self, Property, RawJson},
};

/// One blob of a file-based catalog.
#[derive(Debug, Clone, PartialEq)]
pub enum Blob {
    /// `olm.package`.
    Package(Package),
    /// `olm.channel`.
    Channel(Channel),
    /// `olm.bundle`.
    Bundle(Bundle),
    /// `olm.deprecations`.
    Deprecation(Deprecation),
    /// Any other schema.
    Other(Meta),
}

impl Catalog {
    /// Adds one blob.
    pub fn push(&mut self, blob: Blob) {
        match blob {
            Blob::Package(p) => self.packages.push(p),
            Blob::Channel(c) => self.channels.push(c),
            Blob::Bundle(b) => self.bundles.push(b),
            Blob::Deprecation(d) => self.deprecations.push(d),
            Blob::Other(m) => self.others.push(m),
        }
    }
}

/// Field access on a JSON object, with messages that name the field.
struct Fields(Map<String, Value>);

impl Fields {
    fn opt_str(&mut self, key: &str) -> Result<Option<String>, String> {
        match self.0.remove(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("`{key}` must be a string, found {}", kind(&other))),
        }
    }

    fn req_str(&mut self, key: &str) -> Result<String, String> {
        match self.opt_str(key)? {
            Some(s) if !s.is_empty() => Ok(s),
            _ => Err(format!("missing `{key}`")),
        }
    }

    fn opt_list(&mut self, key: &str) -> Result<Vec<Value>, String> {
        match self.0.remove(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(format!("`{key}` must be a list, found {}", kind(&other))),
        }
    }

    fn opt_str_list(&mut self, key: &str) -> Result<Vec<String>, String> {
        self.opt_list(key)?
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s),
                other => Err(format!("`{key}[{i}]` must be a string, found {}", kind(&other))),
            })
            .collect()
    }

    fn properties(&mut self) -> Result<Vec<Property>, String> {
        match self.0.remove("properties") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(v) => property::parse_list(v),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn object(v: Value, what: &str) -> Result<Fields, String> {
    match v {
        Value::Object(map) => Ok(Fields(map)),
        other => Err(format!("{what} must be an object, found {}", kind(&other))),
    }
}

/// Parses one blob; the message says which field is wrong.
pub fn parse_blob(value: Value) -> Result<Blob, String> {
    let schema = match value.get("schema") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(_) => return Err("`schema` must be a non-empty string".to_owned()),
        None => return Err("missing `schema`".to_owned()),
    };
    match schema.as_str() {
        schema::PACKAGE => parse_package(object(value, "blob")?).map(Blob::Package),
        schema::CHANNEL => parse_channel(object(value, "blob")?).map(Blob::Channel),
        schema::BUNDLE => parse_bundle(object(value, "blob")?).map(Blob::Bundle),
        schema::DEPRECATIONS => parse_deprecations(object(value, "blob")?).map(Blob::Deprecation),
        _ => {
            let package = value.get("package").and_then(Value::as_str).map(str::to_owned);
            let name = value.get("name").and_then(Value::as_str).map(str::to_owned);
            Ok(Blob::Other(Meta {
                blob: RawJson::from_value(&value),
                schema,
                package,
                name,
            }))
        }
    }
}

/// An `olm.package` blob.
fn parse_package(mut f: Fields) -> Result<Package, String> {
    let name = f.req_str("name")?;
    let icon = match f.0.remove("icon") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let mut i = object(v, "`icon`")?;
            Some(Icon {
                base64data: i.opt_str("base64data")?.unwrap_or_default(),
                mediatype: i.opt_str("mediatype")?.unwrap_or_default(),
            })
        }
    };
    Ok(Package {
        default_channel: f.opt_str("defaultChannel")?.filter(|s| !s.is_empty()),
        icon,
        description: f.opt_str("description")?,
        properties: f.properties()?,
        name,
    })
}

/// An `olm.channel` blob.
fn parse_channel(mut f: Fields) -> Result<Channel, String> {
    let name = f.req_str("name")?;
    let package = f.req_str("package")?;
    let entries = f
        .opt_list("entries")?
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let mut e = object(e, &format!("`entries[{i}]`"))?;
            Ok(ChannelEntry {
                name: e.req_str("name").map_err(|m| format!("entries[{i}]: {m}"))?,
                replaces: e.opt_str("replaces")?.filter(|s| !s.is_empty()),
                skips: e
                    .opt_str_list("skips")
                    .map_err(|m| format!("entries[{i}]: {m}"))?,
                skip_range: e.opt_str("skipRange")?.filter(|s| !s.is_empty()),
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Channel {
        name,
        package,
        entries,
        properties: f.properties()?,
    })
}

/// An `olm.bundle` blob.
fn parse_bundle(mut f: Fields) -> Result<Bundle, String> {
    let name = f.req_str("name")?;
    let package = f.req_str("package")?;
    let related_images = f
        .opt_list("relatedImages")?
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let mut r = object(r, &format!("`relatedImages[{i}]`"))?;
            Ok(RelatedImage {
                name: r.opt_str("name")?.unwrap_or_default(),
                image: r.opt_str("image")?.unwrap_or_default(),
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Bundle {
        image: f.opt_str("image")?.unwrap_or_default(),
        properties: f.properties()?,
        related_images,
        name,
        package,
    })
}

/// An `olm.deprecations` blob.
fn parse_deprecations(mut f: Fields) -> Result<Deprecation, String> {
    let package = f.req_str("package")?;
    let entries = f
        .opt_list("entries")?
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            let at = |m: String| format!("entries[{i}]: {m}");
            let mut e = object(e, &format!("`entries[{i}]`"))?;
            let r =
                e.0.remove("reference")
                    .ok_or_else(|| at("missing `reference`".into()))?;
            let mut r = object(r, "`reference`").map_err(at)?;
            Ok(DeprecationEntry {
                reference: DeprecationReference {
                    schema: r.req_str("schema").map_err(at)?,
                    name: r.opt_str("name").map_err(at)?.filter(|s| !s.is_empty()),
                },
                message: e.req_str("message").map_err(at)?,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Deprecation { package, entries })
}

/// Parses the text of one catalog file; `path` names it in errors.
pub fn parse_str(path: impl AsRef<Path>, text: &str) -> Result<Catalog, LoadError> {
    let path = path.as_ref();
    let mut catalog = Catalog::default();
    for (i, doc) in docs::parse_documents(path, text)?.into_iter().enumerate() {
        let blob = parse_blob(doc).map_err(|m| LoadError::invalid(path, Position::document(i + 1), m))?;
        catalog.push(blob);
    }
    Ok(catalog)
}

/// Loads one catalog file.
pub fn load_file(path: impl AsRef<Path>) -> Result<Catalog, LoadError> {
    let path = path.as_ref();
    parse_str(path, &docs::read_text(path)?)
}

/// Whether `opm` reads a file of this name as catalog content.
fn is_catalog_file(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("json" | "yaml" | "yml")
    )
}

/// Every catalog file under `dir`, sorted.
fn catalog_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| LoadError::io(&d, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| LoadError::io(&d, e))?;
            let path = entry.path();
            let file_type = entry.file_type().map_err(|e| LoadError::io(&path, e))?;
            if file_type.is_dir() {
                stack.push(path);
            } else if is_catalog_file(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Loads every catalog file under `dir` (recursively), files in path order. Files are parsed in
/// parallel; the first error in path order is returned.
pub fn load_dir(dir: impl AsRef<Path>) -> Result<Catalog, LoadError> {
    let dir = dir.as_ref();
    if !dir.is_dir() {
        let source = io::Error::new(io::ErrorKind::NotFound, "not a directory");
        return Err(LoadError::io(dir, source));
    }
    let files = catalog_files(dir)?;
    let mut catalog = Catalog::default();
    for part in crate::par::map(&files, |f| load_file(f)) {
        catalog.extend(part?);
    }
    Ok(catalog)
}

/// How [`write_json_stream`] lays out each blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JsonStyle {
    /// Indented with four spaces, as `opm render -o json` prints.
    #[default]
    Pretty,
    /// One blob per line.
    Compact,
}

/// Writes `catalog` as a stream of JSON blobs in `opm`'s order: grouped by package (sorted), then
/// the package, its channels and bundles by name, its deprecations, and other blobs by schema and
/// name. Blob fields keep `opm`'s order; properties and entries keep the catalog's order.
pub fn write_json_stream(catalog: &Catalog, mut w: impl io::Write, style: JsonStyle) -> io::Result<()> {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    names.extend(catalog.packages.iter().map(|p| p.name.as_str()));
    names.extend(catalog.channels.iter().map(|c| c.package.as_str()));
    names.extend(catalog.bundles.iter().map(|b| b.package.as_str()));
    names.extend(catalog.deprecations.iter().map(|d| d.package.as_str()));
    names.extend(catalog.others.iter().map(|o| o.package.as_deref().unwrap_or("")));

    let emit = |w: &mut dyn io::Write, v: &dyn erased::Blob| -> io::Result<()> {
        v.write(w, style)?;
        w.write_all(b"\n")
    };
    for pkg in names {
        let mut packages: Vec<&Package> = catalog.packages.iter().filter(|p| p.name == pkg).collect();
        packages.sort_by(|a, b| a.name.cmp(&b.name));
        let mut channels: Vec<&Channel> = catalog.channels.iter().filter(|c| c.package == pkg).collect();
        channels.sort_by(|a, b| a.name.cmp(&b.name));
        let mut bundles: Vec<&Bundle> = catalog.bundles.iter().filter(|b| b.package == pkg).collect();
        bundles.sort_by(|a, b| a.name.cmp(&b.name));
        let deprecations = catalog.deprecations.iter().filter(|d| d.package == pkg);
        let mut others: Vec<&Meta> = catalog
            .others
            .iter()
            .filter(|o| o.package.as_deref().unwrap_or("") == pkg)
            .collect();
        others.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        for p in packages {
            emit(&mut w, p)?;
        }
        for c in channels {
            emit(&mut w, c)?;
        }
        for b in bundles {
            emit(&mut w, b)?;
        }
        for d in deprecations {
            emit(&mut w, d)?;
        }
        for o in others {
            emit(&mut w, o)?;
        }
    }
    Ok(())
}

/// The catalog as a pretty JSON stream (see [`write_json_stream`]).
pub fn to_json_stream(catalog: &Catalog) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_json_stream(catalog, &mut out, JsonStyle::Pretty);
    String::from_utf8(out).unwrap_or_default()
}

mod erased {
    use std::io;

    use serde::Serialize;

    use super::JsonStyle;

    /// A blob that can be written in either style.
    pub(super) trait Blob {
        fn write(&self, w: &mut dyn io::Write, style: JsonStyle) -> io::Result<()>;
    }

    impl<T: Serialize> Blob for T {
        fn write(&self, w: &mut dyn io::Write, style: JsonStyle) -> io::Result<()> {
            let result = match style {
                JsonStyle::Compact => serde_json::to_writer(w, self),
                JsonStyle::Pretty => {
                    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
                    let mut ser = serde_json::Serializer::with_formatter(w, fmt);
                    self.serialize(&mut ser)
                }
            };
            result.map_err(io::Error::other)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::display_chain;

    const YAML: &str = r#"
---
schema: olm.package
name: foo
defaultChannel: stable
icon: {base64data: aWNvbg==, mediatype: image/png}
---
schema: olm.channel
name: stable
package: foo
entries:
  - name: foo.v0.2.0
    replaces: foo.v0.1.0
    skips: [foo.v0.1.1]
    skipRange: ">=0.1.0 <0.2.0"
---
schema: olm.bundle
name: foo.v0.2.0
package: foo
image: quay.io/foo/bundle:v0.2.0
properties:
  - type: olm.package
    value: {packageName: foo, version: 0.2.0}
  - type: olm.gvk
    value: {group: foo.io, kind: Foo, version: v1}
  - type: olm.custom
    value: {x: [1, 2]}
relatedImages:
  - {name: op, image: quay.io/foo/op:v0.2.0}
---
schema: olm.deprecations
package: foo
entries:
  - reference: {schema: olm.channel, name: alpha}
    message: use stable
---
schema: my.own.schema
package: foo
name: thing
extra: [1, {a: b}]
"#;

    #[test]
    fn yaml_catalog_loads_every_schema() {
        let c = parse_str("index.yaml", YAML).unwrap();
        assert_eq!((c.packages.len(), c.channels.len(), c.bundles.len()), (1, 1, 1));
        assert_eq!(c.packages[0].default_channel.as_deref(), Some("stable"));
        let e = &c.channels[0].entries[0];
        assert_eq!(e.replaces.as_deref(), Some("foo.v0.1.0"));
        assert_eq!(e.skips, ["foo.v0.1.1"]);
        assert_eq!(e.skip_range.as_deref(), Some(">=0.1.0 <0.2.0"));
        let b = &c.bundles[0];
        assert_eq!(b.version().unwrap().as_str(), "0.2.0");
        assert!(matches!(&b.properties[2], Property::Other { type_, .. } if type_ == "olm.custom"));
        assert_eq!(
            c.deprecations[0].entries[0].reference.name.as_deref(),
            Some("alpha")
        );
        assert_eq!(c.others[0].schema, "my.own.schema");
        assert_eq!(
            c.others[0].blob.get(),
            r#"{"extra":[1,{"a":"b"}],"name":"thing","package":"foo","schema":"my.own.schema"}"#
        );
    }

    #[test]
    fn json_stream_round_trips() {
        let c = parse_str("index.yaml", YAML).unwrap();
        for style in [JsonStyle::Pretty, JsonStyle::Compact] {
            let mut out = Vec::new();
            write_json_stream(&c, &mut out, style).unwrap();
            let text = String::from_utf8(out).unwrap();
            let back = parse_str("out.json", &text).unwrap();
            assert_eq!(back, c, "{text}");
        }
        let text = to_json_stream(&c);
        assert!(
            text.starts_with("{\n    \"schema\": \"olm.package\",\n    \"name\": \"foo\""),
            "{text}"
        );
    }

    #[test]
    fn bad_blob_names_file_document_and_field() {
        let err = parse_str(
            "cat/index.yaml",
            "schema: olm.package\nname: a\n---\nschema: olm.channel\nname: x\n",
        )
        .unwrap_err();
        assert_eq!(
            display_chain(&err),
            "invalid content in cat/index.yaml (document 2): missing `package`"
        );
        let err = parse_str("i.json", r#"{"schema":"olm.bundle","name":"b","package":"p","properties":[{"type":"olm.package","value":{"packageName":1}}]}"#).unwrap_err();
        let msg = display_chain(&err);
        assert!(
            msg.starts_with("invalid content in i.json (document 1): properties[0]: invalid olm.package"),
            "{msg}"
        );
        let err = parse_str("i.json", r#"{"name":"b"}"#).unwrap_err();
        assert_eq!(
            display_chain(&err),
            "invalid content in i.json (document 1): missing `schema`"
        );
    }

    #[test]
    fn load_dir_walks_trees_and_reports_missing_dirs() {
        let dir = std::env::temp_dir().join(format!("olm-catalog-fbc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("foo/deeper")).unwrap();
        std::fs::write(dir.join("foo/index.yaml"), YAML).unwrap();
        std::fs::write(
            dir.join("foo/deeper/bar.json"),
            r#"{"schema":"olm.package","name":"bar"} {"schema":"olm.channel","name":"c","package":"bar","entries":[]}"#,
        )
        .unwrap();
        std::fs::write(dir.join("foo/README.md"), "not catalog content").unwrap();
        let c = load_dir(&dir).unwrap();
        assert_eq!(c.packages.len(), 2);
        assert_eq!(c.channels.len(), 2);

        std::fs::write(dir.join("foo/broken.yml"), "schema: [").unwrap();
        let err = load_dir(&dir).unwrap_err();
        assert!(
            display_chain(&err).contains("broken.yml"),
            "{}",
            display_chain(&err)
        );
        std::fs::remove_dir_all(&dir).unwrap();

        let err = load_dir(dir.join("nope")).unwrap_err();
        assert!(display_chain(&err).contains("nope: not a directory"));
    }
}
