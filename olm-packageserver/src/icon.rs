//! The `packagemanifests/icon` subresource, as OLM's packageserver serves it:
//! the first icon of the default channel head's CSV, with its media type as
//! `Content-Type`, or a default image when that CSV has none; 404 when the
//! namespace sees no such package. Pure: what the store holds in, an
//! [`IconAnswer`] out.
//!
//! The `ETag` is `"<package>.<channel>.<head CSV>"`, as OLM's, so that a
//! console that asks again with `If-None-Match` gets `304 Not Modified` until
//! the channel's head changes. (OLM answers 304 to any `If-None-Match` sent
//! with a `resourceVersion`; this compares the tag, so a new head is never
//! hidden.)

use bytes::Bytes;

use olm_catalog_store::channel_heads::HeadIcon;

/// What a console is shown for a package whose default channel head has no
/// icon: a plain grey box, drawn for olm-rs.
pub const DEFAULT_ICON: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><rect x="4" y="4" width="56" height="56" rx="12" fill="#e0e0e0"/><path d="M18 24 32 17l14 7v16l-14 7-14-7zM18 24l14 7 14-7M32 31v16" fill="none" stroke="#6a6e73" stroke-width="3" stroke-linejoin="round"/></svg>
"##;

/// The default icon's media type.
pub const DEFAULT_MEDIA_TYPE: &str = "image/svg+xml";

/// What the store holds for a package's icon.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageIcon {
    /// The package.
    pub package: String,
    /// Its default channel.
    pub channel: String,
    /// That channel's head.
    pub head: String,
    /// The head's icon, if it has one.
    pub icon: Option<HeadIcon>,
}

/// How to answer an icon request.
#[derive(Debug, Clone, PartialEq)]
pub enum IconAnswer {
    /// 200 with the image.
    Image {
        /// `Content-Type`.
        media_type: String,
        /// The image.
        data: Bytes,
        /// `ETag`, when the package has an icon of its own.
        etag: Option<String>,
    },
    /// 304: the client's copy (`If-None-Match`) is current.
    NotModified {
        /// `ETag`.
        etag: String,
    },
    /// 404: no such package in the namespace.
    NotFound,
}

/// The answer for `found` (the package the namespace sees, if any), given the
/// request's `If-None-Match`.
pub fn answer(found: Option<PackageIcon>, if_none_match: Option<&str>) -> IconAnswer {
    let Some(found) = found else {
        return IconAnswer::NotFound;
    };
    let Some(icon) = found.icon else {
        return IconAnswer::Image {
            media_type: DEFAULT_MEDIA_TYPE.to_owned(),
            data: Bytes::from_static(DEFAULT_ICON.as_bytes()),
            etag: None,
        };
    };
    let etag = format!("\"{}.{}.{}\"", found.package, found.channel, found.head);
    if if_none_match.is_some_and(|tags| matches_etag(tags, &etag)) {
        return IconAnswer::NotModified { etag };
    }
    let media_type = if icon.media_type.is_empty() {
        "application/octet-stream".to_owned()
    } else {
        icon.media_type
    };
    IconAnswer::Image {
        media_type,
        data: icon.data,
        etag: Some(etag),
    }
}

/// Whether an `If-None-Match` list (`"a", W/"b"` or `*`) names `etag`.
fn matches_etag(tags: &str, etag: &str) -> bool {
    tags.split(',')
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == "*" || t == etag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(icon: Option<HeadIcon>) -> PackageIcon {
        PackageIcon {
            package: "etcd".into(),
            channel: "stable".into(),
            head: "etcd.v1.2.0".into(),
            icon,
        }
    }

    fn png() -> HeadIcon {
        HeadIcon {
            media_type: "image/png".into(),
            data: Bytes::from_static(b"\x89PNG"),
        }
    }

    #[test]
    fn the_heads_icon_is_served_with_its_media_type_and_tag() {
        assert_eq!(
            answer(Some(found(Some(png()))), None),
            IconAnswer::Image {
                media_type: "image/png".into(),
                data: Bytes::from_static(b"\x89PNG"),
                etag: Some("\"etcd.stable.etcd.v1.2.0\"".into()),
            }
        );
    }

    #[test]
    fn a_package_without_an_icon_gets_the_default_one() {
        let IconAnswer::Image {
            media_type,
            data,
            etag,
        } = answer(Some(found(None)), Some("\"etcd.stable.etcd.v1.2.0\""))
        else {
            panic!("an image");
        };
        assert_eq!(media_type, "image/svg+xml");
        assert!(data.starts_with(b"<svg"));
        assert_eq!(etag, None);
    }

    #[test]
    fn an_unknown_package_is_not_found() {
        assert_eq!(answer(None, None), IconAnswer::NotFound);
    }

    #[test]
    fn a_current_copy_is_not_sent_again_but_a_stale_one_is() {
        let etag = "\"etcd.stable.etcd.v1.2.0\"".to_owned();
        for current in [
            etag.as_str(),
            "W/\"etcd.stable.etcd.v1.2.0\"",
            "\"x\", \"etcd.stable.etcd.v1.2.0\"",
            "*",
        ] {
            assert_eq!(
                answer(Some(found(Some(png()))), Some(current)),
                IconAnswer::NotModified { etag: etag.clone() },
                "{current}"
            );
        }
        let stale = answer(Some(found(Some(png()))), Some("\"etcd.stable.etcd.v1.1.0\""));
        assert!(matches!(stale, IconAnswer::Image { .. }));
    }

    #[test]
    fn an_icon_without_a_media_type_is_sent_as_bytes() {
        let icon = HeadIcon {
            media_type: String::new(),
            data: Bytes::from_static(b"x"),
        };
        let IconAnswer::Image { media_type, .. } = answer(Some(found(Some(icon))), None) else {
            panic!("an image");
        };
        assert_eq!(media_type, "application/octet-stream");
    }
}
