//! JSON text exactly as Go's `encoding/json` writes a decoded Kubernetes object: compact, object
//! keys sorted, `<`, `>` and `&` escaped when asked (Go's `json.Marshal` default), U+2028 and U+2029
//! always escaped, and numbers formatted like Go's float64 encoder. operator-registry builds
//! `olm.bundle.object` data and sorts properties by such text, so matching it byte for byte keeps
//! renders identical to `opm render`.

use serde_json::Value;

/// Compact, sorted-key JSON of `value`, escaping `<`, `>` and `&` when `escape_html`.
pub(crate) fn to_string(value: &Value, escape_html: bool) -> String {
    let mut out = String::new();
    write_value(&mut out, value, escape_html);
    out
}

fn write_value(out: &mut String, value: &Value, escape_html: bool) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s, escape_html),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, escape_html);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Sort explicitly: the map keeps insertion order if serde_json's
            // `preserve_order` feature is enabled anywhere in the build.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, k, escape_html);
                out.push(':');
                write_value(out, v, escape_html);
            }
            out.push('}');
        }
    }
}

fn write_number(out: &mut String, n: &serde_json::Number) {
    if n.is_i64() || n.is_u64() {
        out.push_str(&n.to_string());
        return;
    }
    let Some(f) = n.as_f64() else {
        out.push_str(&n.to_string());
        return;
    };
    out.push_str(&format_float(f));
}

/// Go's float64 encoding: shortest decimal that round-trips, plain notation for
/// 1e-6 <= |f| < 1e21, otherwise exponent notation with a signed, at least two-digit exponent.
pub(crate) fn format_float(f: f64) -> String {
    let abs = f.abs();
    if abs == 0.0 || (1e-6..1e21).contains(&abs) {
        // Rust's Display is the shortest round-trip decimal without exponent ("1", "0.5").
        return format!("{f}");
    }
    let s = format!("{f:e}"); // e.g. "1e21", "1.5e-7"
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            let digits = if digits.len() < 2 {
                format!("0{digits}")
            } else {
                digits.to_string()
            };
            format!("{mantissa}e{sign}{digits}")
        }
        None => s,
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

pub(crate) fn write_str(out: &mut String, s: &str, escape_html: bool) {
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        // Bytes that may need escaping; everything else is copied in runs.
        let special = b < 0x20
            || b == b'"'
            || b == b'\\'
            || (escape_html && matches!(b, b'<' | b'>' | b'&'))
            || (b == 0xe2
                && bytes.get(i + 1) == Some(&0x80)
                && matches!(bytes.get(i + 2), Some(0xa8 | 0xa9)));
        if !special {
            i += 1;
            continue;
        }
        out.push_str(&s[start..i]);
        let (code, len) = if b == 0xe2 {
            (if bytes[i + 2] == 0xa8 { 0x2028 } else { 0x2029 }, 3)
        } else {
            (u32::from(b), 1)
        };
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            _ => {
                out.push_str("\\u");
                for shift in [12, 8, 4, 0] {
                    out.push(HEX[((code >> shift) & 0xf) as usize] as char);
                }
            }
        }
        i += len;
        start = i;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorted_compact_with_html_escaping() {
        let v =
            json!({"b": "<a & b>", "a": [1, 2.5, true, null], "c": {"z": 1, "y": "\u{1}\n\"\\\u{2028}é"}});
        assert_eq!(
            to_string(&v, true),
            r#"{"a":[1,2.5,true,null],"b":"\u003ca \u0026 b\u003e","c":{"y":"\u0001\n\"\\\u2028é","z":1}}"#
        );
        assert_eq!(to_string(&json!(">2.0.0"), false), r#"">2.0.0""#);
    }

    #[test]
    fn floats_like_go() {
        assert_eq!(format_float(1.0), "1");
        assert_eq!(format_float(0.1), "0.1");
        assert_eq!(format_float(1e21), "1e+21");
        assert_eq!(format_float(1.5e-7), "1.5e-07");
        assert_eq!(format_float(-2.5), "-2.5");
        assert_eq!(format_float(123456789.0), "123456789");
    }
}
