//! One answer, for every controller, to "what does this API error mean for a retry?".
//!
//! [`classify`] sorts a [`kube::Error`] into an [`ErrorClass`]; controllers decide what to
//! do with a class (wait for a change, back off, report a condition) but never look at
//! HTTP codes or message text themselves.

use std::fmt;

/// `error` and its sources, joined by `: ` (what `anyhow`'s `{:#}` prints): the
/// one line a binary prints when it fails.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// What kind of failure an API request met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The server or the network failed, or the request was throttled or timed out:
    /// the same request may well succeed later.
    Transient,
    /// The request raced with another write (HTTP 409): read again and retry soon.
    Conflict,
    /// The caller may not do this (HTTP 401, 403): retrying helps only once RBAC or
    /// credentials change, which the operator cannot see coming.
    Forbidden,
    /// The object, its namespace or its API does not exist (HTTP 404, 410): it may
    /// appear later (a CRD still being established) or never.
    Gone,
    /// The server refused the request as invalid (HTTP 400, 422, other 4xx), or the
    /// request could not be built: only a change of the input can help.
    Terminal,
}

impl ErrorClass {
    /// A low-cardinality label for metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Transient => "transient",
            ErrorClass::Conflict => "conflict",
            ErrorClass::Forbidden => "forbidden",
            ErrorClass::Gone => "gone",
            ErrorClass::Terminal => "terminal",
        }
    }

    /// Whether only a change of the input can help.
    pub fn is_terminal(self) -> bool {
        self == ErrorClass::Terminal
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The class of an HTTP status code the API server answered with.
pub fn classify_code(code: u16) -> ErrorClass {
    match code {
        401 | 403 => ErrorClass::Forbidden,
        404 | 410 => ErrorClass::Gone,
        409 => ErrorClass::Conflict,
        408 | 429 => ErrorClass::Transient,
        500.. => ErrorClass::Transient,
        _ => ErrorClass::Terminal,
    }
}

/// The class of `error`: what the API server answered, or `Transient` when it did not
/// answer (connection refused, TLS or HTTP failure, a stream cut short).
pub fn classify(error: &kube::Error) -> ErrorClass {
    match error {
        kube::Error::Api(status) => classify_code(status.code),
        // Our own request could not be built or its answer not read as the type we
        // asked for: the same request would fail the same way.
        kube::Error::BuildRequest(_) | kube::Error::SerdeError(_) | kube::Error::HttpError(_) => {
            ErrorClass::Terminal
        }
        _ => ErrorClass::Transient,
    }
}

/// The HTTP status code of `error`, when the API server answered.
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            ..Default::default()
        }))
    }

    #[test]
    fn codes_map_to_classes() {
        for (code, class) in [
            (400, ErrorClass::Terminal),
            (401, ErrorClass::Forbidden),
            (403, ErrorClass::Forbidden),
            (404, ErrorClass::Gone),
            (405, ErrorClass::Terminal),
            (408, ErrorClass::Transient),
            (409, ErrorClass::Conflict),
            (410, ErrorClass::Gone),
            (422, ErrorClass::Terminal),
            (429, ErrorClass::Transient),
            (500, ErrorClass::Transient),
            (503, ErrorClass::Transient),
            (504, ErrorClass::Transient),
        ] {
            assert_eq!(classify(&api(code)), class, "HTTP {code}");
        }
    }

    #[test]
    fn no_answer_is_transient_and_a_bad_answer_terminal() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(classify(&kube::Error::ReadEvents(io)), ErrorClass::Transient);
        let serde = serde_json::from_str::<u8>("x").unwrap_err();
        assert_eq!(classify(&kube::Error::SerdeError(serde)), ErrorClass::Terminal);
        assert_eq!(status_code(&api(409)), Some(409));
        assert!(ErrorClass::Terminal.is_terminal() && !ErrorClass::Gone.is_terminal());
    }
}
