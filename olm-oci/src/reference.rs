//! Image references (`[registry/]repository[:tag][@digest]`), parsed by hand.
//!
//! oci-client parses a reference with one regular expression of the whole
//! grammar. Its tag rule (`[\w][\w.-]{0,127}`, with Unicode word characters)
//! compiles into an automaton of several MiB that the process then keeps for
//! ever, and the compilation takes hundreds of milliseconds. The grammar is
//! small enough to check directly: [`parse`] accepts what that expression
//! accepts (tags and names in ASCII, as the distribution spec defines them)
//! and normalises the same way (Docker Hub's `docker.io` and `library/`).

use oci_client::Reference;

/// The longest repository name (`NAME_TOTAL_LENGTH_MAX`).
const NAME_MAX: usize = 255;

/// The longest tag.
const TAG_MAX: usize = 128;

/// Why a reference does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// Empty.
    #[error("repository name must have at least one component")]
    Empty,
    /// Not of the form `[registry/]repository[:tag][@digest]`.
    #[error("invalid reference format")]
    Format,
    /// The repository name is longer than 255 characters.
    #[error("repository name must not be more than 255 characters")]
    NameTooLong,
    /// The digest is not `algorithm:hex`.
    #[error("invalid checksum digest format")]
    DigestFormat,
    /// The digest's hex part has the wrong length for its algorithm.
    #[error("invalid checksum digest length")]
    DigestLength,
    /// Not sha256, sha384 or sha512.
    #[error("unsupported digest algorithm")]
    DigestAlgorithm,
}

/// Parses `image` as a reference, as `Reference::from_str` would.
pub fn parse(image: &str) -> Result<Reference, ReferenceError> {
    if image.is_empty() {
        return Err(ReferenceError::Empty);
    }
    let (rest, digest) = match image.split_once('@') {
        Some((rest, digest)) => (rest, Some(digest)),
        None => (image, None),
    };
    // A `:` after the last `/` starts the tag; one before it is a registry's port.
    let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match rest[last_slash..].find(':') {
        Some(colon) => (&rest[..last_slash + colon], Some(&rest[last_slash + colon + 1..])),
        None => (rest, None),
    };
    if !is_name(name) || !tag.is_none_or(is_tag) || !digest.is_none_or(is_digest_form) {
        return Err(ReferenceError::Format);
    }
    let (registry, repository) = split_domain(name);
    if repository.len() > NAME_MAX {
        return Err(ReferenceError::NameTooLong);
    }
    if let Some(digest) = digest {
        check_digest_length(digest)?;
    }
    Ok(match (tag, digest) {
        (Some(tag), Some(digest)) => {
            Reference::with_tag_and_digest(registry, repository, tag.to_owned(), digest.to_owned())
        }
        (None, Some(digest)) => Reference::with_digest(registry, repository, digest.to_owned()),
        (tag, None) => Reference::with_tag(registry, repository, tag.unwrap_or("latest").to_owned()),
    })
}

/// `[domain/]component(/component)*`: every part a path component, or the
/// first a registry host (with a port) when more follow.
fn is_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    let path_from = usize::from(parts.len() > 1 && !is_path_component(parts[0]) && is_domain(parts[0]));
    parts[path_from..].iter().all(|p| is_path_component(p))
}

/// `[a-z0-9]+` joined by `.`, `_`, `__` or any number of `-`.
fn is_path_component(part: &str) -> bool {
    let bytes = part.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.first().is_some_and(|&b| alnum(b)) || !bytes.last().is_some_and(|&b| alnum(b)) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &part[start..i];
        let allowed = matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-');
        if !allowed {
            return false;
        }
    }
    true
}

/// `label(.label)*[:port]`, a label being letters, digits and inner `-`.
fn is_domain(domain: &str) -> bool {
    let (host, port) = match domain.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    let is_label = |label: &str| {
        let bytes = label.as_bytes();
        !bytes.is_empty()
            && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-')
    };
    host.split('.').all(is_label)
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A word character, then up to 127 word characters, `.` or `-` (word
/// characters in Unicode's sense, as the expression has them).
fn is_tag(tag: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    tag.chars().count() <= TAG_MAX
        && tag.chars().next().is_some_and(word)
        && tag.chars().all(|c| word(c) || c == '.' || c == '-')
}

/// `algorithm:hex`, the algorithm `[A-Za-z][A-Za-z0-9]*` joined by `-_+.`, at
/// least 32 hex digits.
fn is_digest_form(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let is_part = |p: &str| {
        p.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
            && p.bytes().all(|b| b.is_ascii_alphanumeric())
    };
    algorithm.split(['-', '_', '+', '.']).all(is_part)
        && hex.len() >= 32
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

fn check_digest_length(digest: &str) -> Result<(), ReferenceError> {
    let (algorithm, hex) = digest.split_once(':').ok_or(ReferenceError::DigestFormat)?;
    let wanted = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ReferenceError::DigestAlgorithm),
    };
    if hex.len() == wanted {
        Ok(())
    } else {
        Err(ReferenceError::DigestLength)
    }
}

/// The registry and repository of a name: Docker Hub (`docker.io`, official
/// images under `library/`) unless the first part names a host.
fn split_domain(name: &str) -> (String, String) {
    let (mut domain, mut remainder) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            (first.to_owned(), rest.to_owned())
        }
        _ => ("docker.io".to_owned(), name.to_owned()),
    };
    if domain == "index.docker.io" {
        domain = "docker.io".to_owned();
    }
    if domain == "docker.io" && !remainder.contains('/') {
        remainder = format!("library/{remainder}");
    }
    (domain, remainder)
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    const SHA256: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    /// References of every shape, valid or not, each compared with oci-client's parser.
    fn cases() -> Vec<String> {
        let mut cases: Vec<String> = [
            "quay.io/operatorhubio/catalog:latest",
            "quay.io/operatorhubio/catalog",
            "busybox",
            "busybox:1.36",
            "library/busybox",
            "index.docker.io/busybox",
            "docker.io/library/busybox:latest",
            "localhost/app",
            "localhost:5000/app:v1",
            "127.0.0.1:5000/team/bundle:v0.1.0",
            "[::1]:5000/app",
            "registry.k8s.io/pause:3.10",
            "my-registry.example.com:443/a/b/c/d:tag_with.dots-and-dashes",
            "example.com/a__b/c---d/e.f_g",
            "example.com/a___b",
            "example.com/a..b",
            "example.com/-a",
            "example.com/a-",
            "example.com/A",
            "Example.com/a",
            "example.com:/a",
            "example.com:port/a",
            "-example.com/a",
            "exa_mple.com/a",
            "a:b:c",
            "a/b:",
            ":tag",
            "a//b",
            "/a",
            "a/",
            "a:.tag",
            "a:-tag",
            "a:_tag",
            "a:tag with space",
            "a:tág",
            "a@",
            "a@sha256:abc",
            "a@sha256:0123456789abcdef0123456789abcdef",
            "a@md5:0123456789abcdef0123456789abcdef",
            "a@sha256+b64u:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "a@1sha:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "a@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdeg",
            "a@b@c",
        ]
        .map(str::to_owned)
        .to_vec();
        cases.push(format!("quay.io/a/b@{SHA256}"));
        cases.push(format!("quay.io/a/b:v1@{SHA256}"));
        cases.push(format!("localhost:5000/a@{SHA256}"));
        cases.push(format!("a@sha512:{}", "f".repeat(128)));
        cases.push(format!("a@sha384:{}", "f".repeat(96)));
        cases.push(format!("a:{}", "t".repeat(128)));
        cases.push(format!("a:{}", "t".repeat(129)));
        cases.push(format!("example.com/{}", "a".repeat(255)));
        cases.push(format!("example.com/{}", "a".repeat(256)));
        cases.push("a".repeat(248));
        cases
    }

    #[test]
    fn references_parse_as_oci_client_parses_them() {
        for case in cases() {
            let ours = parse(&case);
            let theirs = Reference::from_str(&case);
            match (&ours, &theirs) {
                (Ok(ours), Ok(theirs)) => {
                    assert_eq!(ours.registry(), theirs.registry(), "{case}");
                    assert_eq!(ours.repository(), theirs.repository(), "{case}");
                    assert_eq!(ours.tag(), theirs.tag(), "{case}");
                    assert_eq!(ours.digest(), theirs.digest(), "{case}");
                    assert_eq!(ours.whole(), theirs.whole(), "{case}");
                }
                (Err(ours), Err(theirs)) => assert_eq!(ours.to_string(), theirs.to_string(), "{case}"),
                _ => panic!("{case}: ours {ours:?}, oci-client's {theirs:?}"),
            }
        }
    }

    #[test]
    fn an_empty_reference_is_refused() {
        assert_eq!(parse(""), Err(ReferenceError::Empty));
    }
}
