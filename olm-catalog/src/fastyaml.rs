//! A fast reader for the block-style YAML that tools write (`opm`, `operator-sdk`, go-yaml):
//! block mappings and sequences, plain, quoted and literal scalars, comments. Anything else (flow
//! collections other than `{}` and `[]`, anchors, aliases, tags, folded scalars, explicit keys,
//! tabs, directives, ...) makes it give up on that document, and the full YAML parser reads it
//! instead, so results never differ: the corpus tests compare both on every YAML file.
//!
//! Plain scalars that could be anything but a string (`yes`, `1.5`, `0x1F`, `2026-05-12T14:22:59`,
//! ...) are resolved by the full parser too, so typing follows it exactly.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

/// One document of a multi-document text.
#[cfg(test)]
pub(crate) struct Doc<'a> {
    /// The document's text, without its `---` line.
    pub text: &'a str,
}

/// Splits `text` at `---` and `...` lines. `None` if the text uses something the splitter does not
/// handle (directives, content after `---`, carriage returns).
#[cfg(test)]
pub(crate) fn split_documents(text: &str) -> Option<Vec<Doc<'_>>> {
    if text.contains('\r') {
        return None;
    }
    let mut docs = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let l = line.trim_end_matches('\n');
        let is_start = l == "---" || l.starts_with("--- ") || l.starts_with("---\t");
        let is_end = l == "..." || l.starts_with("... ");
        if l.starts_with('%') {
            return None;
        }
        if is_start || is_end {
            if is_start
                && !l[3..].trim_matches(WS).is_empty()
                && !l[3..].trim_start_matches(WS).starts_with('#')
            {
                return None;
            }
            docs.push(Doc {
                text: &text[start..offset],
            });
            start = offset + line.len();
        }
        offset += line.len();
    }
    docs.push(Doc { text: &text[start..] });
    Some(docs)
}

/// YAML's white space (other Unicode white space is content).
const WS: [char; 2] = [' ', '\t'];

#[derive(Clone, Copy)]
struct Line<'a> {
    /// Leading spaces.
    indent: usize,
    /// The line after its indentation (no newline).
    text: &'a str,
    /// The whole line (no newline).
    raw: &'a str,
}

impl Line<'_> {
    fn is_blank(&self) -> bool {
        self.text.trim_matches(WS).is_empty()
    }

    fn is_blank_or_comment(&self) -> bool {
        self.is_blank() || self.text.starts_with('#')
    }
}

/// Collections nested deeper than this make the fast reader give up, so that the full parser
/// refuses them with its own depth limit instead of this recursive reader running out of stack.
const MAX_DEPTH: usize = 64;

struct Parser<'a, 'l> {
    lines: &'l mut [Line<'a>],
    pos: usize,
    /// Nodes being read, the current one included.
    depth: usize,
}

fn line(raw: &str) -> Line<'_> {
    let indent = raw.len() - raw.trim_start_matches(' ').len();
    Line {
        indent,
        text: &raw[indent..],
        raw,
    }
}

/// Parses one document; `None` means "use the full parser".
#[cfg(test)]
pub(crate) fn parse_document(text: &str) -> Option<Value> {
    let mut lines: Vec<Line<'_>> = text.split('\n').map(line).collect();
    parse_lines(&mut lines)
}

/// Every document of `text`, each read by the fast reader or, where it gives up, by `fallback`
/// (which returns that document's values, or `None` if it does not parse). Null documents are
/// dropped. `None` if the text cannot be split into documents or a document does not parse.
pub(crate) fn parse_stream(text: &str, fallback: impl Fn(&str) -> Option<Vec<Value>>) -> Option<Vec<Value>> {
    if text.contains('\r') {
        return None;
    }
    let mut lines: Vec<Line<'_>> = text.split('\n').map(line).collect();
    let mut out = Vec::new();
    let (mut start, mut start_byte, mut byte) = (0, 0, 0);
    let n = lines.len();
    for i in 0..=n {
        let boundary = match lines.get(i) {
            None => true,
            Some(l) => {
                if l.raw.starts_with('%') {
                    return None;
                }
                let is_start = l.raw == "---" || l.raw.starts_with("--- ") || l.raw.starts_with("---\t");
                if is_start
                    && !l.raw[3..].trim_matches(WS).is_empty()
                    && !l.raw[3..].trim_start_matches(WS).starts_with('#')
                {
                    return None;
                }
                is_start || l.raw == "..." || l.raw.starts_with("... ")
            }
        };
        if boundary {
            match parse_lines(&mut lines[start..i]) {
                Some(Value::Null) => {}
                Some(v) => out.push(v),
                None => {
                    let end = if i < n { byte } else { text.len() };
                    out.extend(
                        fallback(&text[start_byte..end])?
                            .into_iter()
                            .filter(|v| !v.is_null()),
                    );
                }
            }
            start = i + 1;
            start_byte = (byte + lines.get(i).map_or(0, |l| l.raw.len() + 1)).min(text.len());
        }
        if let Some(l) = lines.get(i) {
            byte += l.raw.len() + 1;
        }
    }
    Some(out)
}

fn parse_lines(lines: &mut [Line<'_>]) -> Option<Value> {
    let mut p = Parser {
        lines,
        pos: 0,
        depth: 0,
    };
    p.skip_blank();
    if p.pos >= p.lines.len() {
        return Some(Value::Null);
    }
    let indent = p.lines[p.pos].indent;
    let v = p.node(indent, -1)?;
    p.skip_blank();
    (p.pos >= p.lines.len()).then_some(v)
}

/// Characters a plain scalar or key may not start with.
fn is_indicator(c: char) -> bool {
    matches!(
        c,
        '-' | '?'
            | ':'
            | ','
            | '['
            | ']'
            | '{'
            | '}'
            | '#'
            | '&'
            | '*'
            | '!'
            | '|'
            | '>'
            | '\''
            | '"'
            | '%'
            | '@'
            | '`'
    )
}

impl<'a> Parser<'a, '_> {
    fn skip_blank(&mut self) {
        while self.pos < self.lines.len() && self.lines[self.pos].is_blank_or_comment() {
            self.pos += 1;
        }
    }

    fn peek_nonblank(&self) -> Option<Line<'a>> {
        self.lines[self.pos..]
            .iter()
            .find(|l| !l.is_blank_or_comment())
            .copied()
    }

    /// The node starting at the current (non-blank) line, at column `indent`; `parent` is the
    /// indentation of the enclosing collection (-1 at the top).
    fn node(&mut self, indent: usize, parent: isize) -> Option<Value> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let value = self.node_at_depth(indent, parent);
        self.depth -= 1;
        value
    }

    fn node_at_depth(&mut self, indent: usize, parent: isize) -> Option<Value> {
        let line = self.lines[self.pos];
        if line.text.starts_with('\t') {
            return None;
        }
        if line.text == "-" || line.text.starts_with("- ") {
            return self.sequence(indent);
        }
        if split_key(line.text)?.is_some() {
            return self.mapping(indent);
        }
        self.pos += 1;
        self.inline_value(line.text, parent, false)
    }

    fn sequence(&mut self, indent: usize) -> Option<Value> {
        let mut items = Vec::new();
        loop {
            self.skip_blank();
            let Some(&line) = self.lines.get(self.pos) else {
                break;
            };
            if line.text.starts_with('\t') {
                return None;
            }
            if line.indent != indent || !(line.text == "-" || line.text.starts_with("- ")) {
                if line.indent > indent {
                    return None;
                }
                break;
            }
            let after = line.text[1..].trim_start_matches(' ');
            if after.is_empty() {
                self.pos += 1;
                match self.peek_nonblank() {
                    Some(next) if next.indent > indent => {
                        self.skip_blank();
                        items.push(self.node(next.indent, indent as isize)?);
                    }
                    _ => items.push(Value::Null),
                }
            } else {
                // Compact nested node: read the rest of the line as if it started at its column.
                let column = indent + (line.text.len() - after.len());
                self.lines[self.pos] = Line {
                    indent: column,
                    text: after,
                    raw: line.raw,
                };
                items.push(self.node(column, indent as isize)?);
            }
        }
        Some(Value::Array(items))
    }

    fn mapping(&mut self, indent: usize) -> Option<Value> {
        let mut map = Map::new();
        loop {
            self.skip_blank();
            let Some(&line) = self.lines.get(self.pos) else {
                break;
            };
            if line.text.starts_with('\t') {
                return None;
            }
            if line.indent != indent {
                if line.indent > indent {
                    return None;
                }
                break;
            }
            let (key, rest) = split_key(line.text)??;
            self.pos += 1;
            let value = if rest.is_empty() || rest.starts_with('#') {
                match self.peek_nonblank() {
                    Some(next) if next.indent > indent => {
                        self.skip_blank();
                        self.node(next.indent, indent as isize)?
                    }
                    Some(next)
                        if next.indent == indent && (next.text == "-" || next.text.starts_with("- ")) =>
                    {
                        self.skip_blank();
                        self.sequence(indent)?
                    }
                    _ => Value::Null,
                }
            } else {
                self.inline_value(rest, indent as isize, true)?
            };
            map.insert(key.into_owned(), value);
        }
        Some(Value::Object(map))
    }

    /// A value that starts on a line already consumed, as `first`; continuation lines must be
    /// indented more than `parent`.
    fn inline_value(&mut self, first: &'a str, parent: isize, map_value: bool) -> Option<Value> {
        let c = first.chars().next()?;
        match c {
            '"' => self.double_quoted(first, parent).map(Value::String),
            '\'' => self.single_quoted(first, parent).map(Value::String),
            '|' => self.literal(first, parent, map_value).map(Value::String),
            '{' | '[' => match strip_comment(first) {
                "{}" => Some(Value::Object(Map::new())),
                "[]" => Some(Value::Array(Vec::new())),
                _ => None,
            },
            c if is_indicator(c) && !(c == '-' && first.len() > 1 && !first[1..].starts_with(' ')) => None,
            _ => self.plain(first, parent),
        }
    }

    fn plain(&mut self, first: &'a str, parent: isize) -> Option<Value> {
        let (head, commented) = match first.find(" #") {
            Some(i) => (first[..i].trim_end_matches(WS), true),
            None => (first.trim_end_matches(WS), false),
        };
        if head.contains(": ") || head.ends_with(':') {
            return None;
        }
        let mut text = head.to_owned();
        if !commented {
            // Continuation lines: more indented than the parent, not blank-terminated.
            let mut breaks = 0;
            let mut i = self.pos;
            while let Some(l) = self.lines.get(i) {
                if l.is_blank() {
                    breaks += 1;
                    i += 1;
                    continue;
                }
                if (l.indent as isize) <= parent || l.text.starts_with('#') {
                    break;
                }
                let t = l.text.trim_end_matches(WS);
                if t.contains(": ") || t.ends_with(':') || t.contains(" #") || t.starts_with('\t') {
                    return None;
                }
                if breaks == 0 {
                    text.push(' ');
                } else {
                    text.extend(std::iter::repeat_n('\n', breaks));
                }
                text.push_str(t);
                breaks = 0;
                i += 1;
                self.pos = i;
            }
        }
        resolve_plain(text)
    }

    /// Lines after the current one for a multi-line quoted scalar.
    fn next_raw(&mut self) -> Option<&'a str> {
        let l = self.lines.get(self.pos)?;
        self.pos += 1;
        Some(l.raw)
    }

    fn double_quoted(&mut self, first: &'a str, _parent: isize) -> Option<String> {
        let mut out = String::new();
        let mut keep = 0; // length of `out` without trailing literal white space
        let mut rest = &first[1..];
        loop {
            let mut chars = rest.char_indices();
            let mut escaped_break = false;
            while let Some((i, c)) = chars.next() {
                match c {
                    '"' => return finish_quoted(&rest[i + 1..]).then_some(out),
                    '\\' => {
                        let Some((_, e)) = chars.next() else {
                            escaped_break = true;
                            break;
                        };
                        out.push(escaped(e, &mut chars)?);
                        keep = out.len();
                    }
                    c => {
                        out.push(c);
                        if c != ' ' && c != '\t' {
                            keep = out.len();
                        }
                    }
                }
            }
            // End of line inside the quotes: fold.
            if !escaped_break {
                out.truncate(keep);
            }
            let mut blanks = 0;
            let next = loop {
                let raw = self.next_raw()?;
                if raw.trim_matches(WS).is_empty() {
                    blanks += 1;
                } else {
                    break raw;
                }
            };
            if next.trim_start_matches(WS).starts_with("---") || next.starts_with("...") {
                return None;
            }
            if !escaped_break {
                if blanks == 0 {
                    out.push(' ');
                } else {
                    out.extend(std::iter::repeat_n('\n', blanks));
                }
            } else {
                out.extend(std::iter::repeat_n('\n', blanks));
            }
            keep = out.len();
            rest = next.trim_start_matches(WS);
        }
    }

    fn single_quoted(&mut self, first: &'a str, _parent: isize) -> Option<String> {
        let mut out = String::new();
        let mut keep = 0;
        let mut rest = &first[1..];
        loop {
            let mut chars = rest.char_indices().peekable();
            while let Some((i, c)) = chars.next() {
                if c == '\'' {
                    if matches!(chars.peek(), Some((_, '\''))) {
                        chars.next();
                        out.push('\'');
                        keep = out.len();
                        continue;
                    }
                    return finish_quoted(&rest[i + 1..]).then_some(out);
                }
                out.push(c);
                if c != ' ' && c != '\t' {
                    keep = out.len();
                }
            }
            out.truncate(keep);
            let mut blanks = 0;
            let next = loop {
                let raw = self.next_raw()?;
                if raw.trim_matches(WS).is_empty() {
                    blanks += 1;
                } else {
                    break raw;
                }
            };
            if next.trim_start_matches(WS).starts_with("---") || next.starts_with("...") {
                return None;
            }
            if blanks == 0 {
                out.push(' ');
            } else {
                out.extend(std::iter::repeat_n('\n', blanks));
            }
            keep = out.len();
            rest = next.trim_start_matches(WS);
        }
    }

    /// A literal block scalar (`|`, `|-`, `|+`); explicit indentation indicators are left to the
    /// full parser.
    fn literal(&mut self, header: &'a str, parent: isize, map_value: bool) -> Option<String> {
        let h = strip_comment(header);
        let mut chomp = Chomp::Clip;
        let mut explicit = None;
        for c in h[1..].chars() {
            match c {
                '-' if matches!(chomp, Chomp::Clip) => chomp = Chomp::Strip,
                '+' if matches!(chomp, Chomp::Clip) => chomp = Chomp::Keep,
                '1'..='9' if explicit.is_none() => explicit = c.to_digit(10).map(|d| d as usize),
                _ => return None,
            }
        }
        let start = self.pos;
        let indent = match explicit {
            // Relative to the mapping's indentation; elsewhere left to the full parser.
            Some(m) if map_value && parent >= 0 => parent as usize + m,
            Some(_) => return None,
            None => {
                // Content indentation: that of the first non-blank line.
                match self.lines[start..].iter().find(|l| !l.is_blank()) {
                    Some(f) if (f.indent as isize) > parent && !f.text.starts_with('\t') => f.indent,
                    Some(f) if (f.indent as isize) > parent => return None,
                    // No content: an empty string (keeping trailing lines is left to the full parser).
                    _ => return (!matches!(chomp, Chomp::Keep)).then(String::new),
                }
            }
        };
        let mut out = String::new();
        let mut i = start;
        while let Some(l) = self.lines.get(i) {
            if l.is_blank() {
                if l.raw.len() > indent {
                    // White space beyond the content indentation is content.
                    if explicit.is_none() && self.lines[start..i].iter().all(|l| l.is_blank()) {
                        return None;
                    }
                    out.push_str(&l.raw[indent..]);
                }
                out.push('\n');
            } else if l.indent >= indent {
                out.push_str(&l.raw[indent..]);
                out.push('\n');
            } else {
                break;
            }
            i += 1;
        }
        // Trailing blank lines at the end of the document are not ours to count.
        self.pos = i;
        let body_end = out.trim_end_matches('\n').len();
        match chomp {
            Chomp::Strip => out.truncate(body_end),
            Chomp::Clip => {
                out.truncate(body_end);
                if body_end > 0 {
                    out.push('\n');
                }
            }
            Chomp::Keep => {
                if i >= self.lines.len() {
                    // Keeping trailing lines up to the end of the text: leave that to the full parser.
                    return None;
                }
            }
        }
        Some(out)
    }
}

enum Chomp {
    Clip,
    Strip,
    Keep,
}

/// The character of escape `\e` in a double-quoted scalar, reading the hex digits
/// of `\x`, `\u` and `\U` from `chars`; `None` for an invalid escape.
fn escaped(e: char, chars: &mut std::str::CharIndices<'_>) -> Option<char> {
    if let Some(c) = simple_escape(e) {
        return Some(c);
    }
    let len = match e {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        _ => return None,
    };
    let mut code = 0u32;
    for _ in 0..len {
        let (_, h) = chars.next()?;
        code = code * 16 + h.to_digit(16)?;
    }
    char::from_u32(code)
}

/// The character of a one-letter escape `\e` in a double-quoted scalar.
fn simple_escape(e: char) -> Option<char> {
    match e {
        '0' => Some('\0'),
        'a' => Some('\u{7}'),
        'b' => Some('\u{8}'),
        't' | '\t' => Some('\t'),
        'n' => Some('\n'),
        'v' => Some('\u{b}'),
        'f' => Some('\u{c}'),
        'r' => Some('\r'),
        'e' => Some('\u{1b}'),
        ' ' => Some(' '),
        '"' => Some('"'),
        '/' => Some('/'),
        '\\' => Some('\\'),
        'N' => Some('\u{85}'),
        '_' => Some('\u{a0}'),
        'L' => Some('\u{2028}'),
        'P' => Some('\u{2029}'),
        _ => None,
    }
}

/// After a closing quote only white space and a comment may follow.
fn finish_quoted(rest: &str) -> bool {
    let t = rest.trim_start_matches(WS);
    t.is_empty() || (t.starts_with('#') && rest.len() > t.len())
}

/// Cuts a ` #` comment and trailing white space off a plain value.
fn strip_comment(s: &str) -> &str {
    let cut = s.find(" #").unwrap_or(s.len());
    s[..cut].trim_end_matches(WS)
}

/// Splits `key: rest` off a line: `Some(None)` if the line is not a mapping entry, `None` if it
/// cannot tell.
#[allow(clippy::option_option)]
fn split_key(text: &str) -> Option<Option<(Cow<'_, str>, &str)>> {
    let first = text.chars().next()?;
    if first == '"' || first == '\'' {
        // A quoted key must close on the line and be followed by ':'.
        let mut p = Parser {
            lines: &mut [],
            pos: 0,
            depth: 0,
        };
        let end = quoted_end(text)?;
        let after = &text[end..];
        let Some(rest) = after.trim_start_matches(' ').strip_prefix(':') else {
            return Some(None);
        };
        if !(rest.is_empty() || rest.starts_with(' ')) {
            return None;
        }
        let key = if first == '"' {
            p.double_quoted(&text[..end], -1)?
        } else {
            p.single_quoted(&text[..end], -1)?
        };
        return Some(Some((Cow::Owned(key), rest.trim_start_matches(WS))));
    }
    if first == '?' || first == '[' || first == '{' || first == '&' || first == '*' || first == '!' {
        return if text.contains(':') { None } else { Some(None) };
    }
    let colon = text.match_indices(':').find(|(i, _)| {
        let after = &text[i + 1..];
        after.is_empty() || after.starts_with(' ')
    });
    let Some((i, _)) = colon else { return Some(None) };
    let key = text[..i].trim_end_matches(WS);
    if key.contains(" #") || key.starts_with('#') {
        return Some(None);
    }
    // A key may start with `-` not followed by a space; other indicators are left to the full parser.
    if key.is_empty() || key.starts_with("- ") || (is_indicator(first) && first != '-') {
        return None;
    }
    Some(Some((Cow::Borrowed(key), text[i + 1..].trim_start_matches(WS))))
}

/// Byte index just past the closing quote of a quoted scalar that ends on this line.
fn quoted_end(text: &str) -> Option<usize> {
    let q = text.chars().next()?;
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        if q == '"' && c == '\\' {
            chars.next();
        } else if c == q {
            if q == '\'' && text[i + 1..].starts_with('\'') {
                chars.next();
                continue;
            }
            return Some(i + 1);
        }
    }
    None
}

/// Types a plain scalar as the full parser would: only what is surely a string, a null or a plain
/// decimal integer is decided here.
fn resolve_plain(text: String) -> Option<Value> {
    let t = text.as_str();
    if matches!(t, "" | "~" | "null" | "Null" | "NULL") {
        return Some(Value::Null);
    }
    let wordlike = t.len() <= 5
        && ["true", "false", "yes", "no", "y", "n", "on", "off"]
            .iter()
            .any(|w| t.eq_ignore_ascii_case(w));
    if !wordlike {
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if digits(t) && (t.len() == 1 || !t.starts_with('0')) {
            if let Ok(n) = t.parse::<u64>() {
                return Some(Value::Number(n.into()));
            }
        } else if let Some(d) = t.strip_prefix('-')
            && digits(d)
            && (d.len() == 1 || !d.starts_with('0'))
            && let Ok(n) = t.parse::<i64>()
        {
            return Some(Value::Number(Number::from(n)));
        }
        // Characters of numbers in any YAML spelling (hex, octal, exponents, sexagesimal, .inf,
        // .nan); a scalar with any other character is a string.
        let numeric = |b: u8| {
            b.is_ascii_hexdigit()
                || matches!(
                    b.to_ascii_lowercase(),
                    b'+' | b'-' | b'.' | b'_' | b':' | b'x' | b'o' | b'i' | b'n' | b't' | b'y'
                )
        };
        // Nor is a number: text with two dots, or a sign inside that does not follow an exponent
        // (versions such as `1.19.2`, dates such as `2026-05-12T14:22:59`).
        let bytes = t.as_bytes();
        let inner_sign =
            (1..bytes.len()).any(|i| matches!(bytes[i], b'+' | b'-') && !matches!(bytes[i - 1], b'e' | b'E'));
        if !t.bytes().all(numeric) || inner_sign || bytes.iter().filter(|&&b| b == b'.').count() > 1 {
            return Some(Value::String(text));
        }
    }
    // Ask the full parser about this one scalar.
    match serde_saphyr::from_str::<Value>(t) {
        Ok(v @ (Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_))) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn both(text: &str) -> (Option<Value>, Value) {
        let fast = parse_document(text);
        let full: Value = serde_saphyr::from_str(text).unwrap();
        (fast, full)
    }

    #[track_caller]
    fn same(text: &str) {
        let (fast, full) = both(text);
        assert_eq!(fast.as_ref(), Some(&full), "{text}");
    }

    #[test]
    fn agrees_with_the_full_parser() {
        same(
            "a: 1\nb: -2\nc: 1.5\nd: yes\ne: ~\nf: v1beta1\ng: 2026-05-12T14:22:59\nh: '>2.0.0'\ni: \"x\\ty\\u00e9\"\n",
        );
        same("entries:\n- name: a\n  replaces: b\n  skips:\n  - c\n  - d\n- name: e\nother: {}\nlist: []\n");
        same(
            "description: Kubernetes operator to allow\n  developers to create\n\n  things.\nnext: x # comment\n",
        );
        same("alm-examples: |\n  [\n    {\"a\": 1}\n  ]\nstrip: |-\n  x\n\n  y\n\nclip: |\n  z\n\n");
        same("q: \"folded\n  across   \n\n  lines\"\ns: 'it''s\n  here'\n");
        same("- - a\n  - b\n- c: 1\n  d: 2\n-\n  e: 3\n- \"k\": v\n");
        same("key with spaces: value without colon # c\nurl: http://x.io/a#b\n");
        same("n: 0123\no: 0x1F\np: .5\nq: 1e3\nr: 007\ns: -0\nt: 18446744073709551616\n");
        same("u: 1.19.2\nv: 2.5.3514-4052426\nw: e5f809f\nx: 1e-5\ny: 1:30\nz: 2026-05-12\n");
        same("wide: a\u{3000}\nlit: |\n  \u{3000}x\n");
        same("a:\n  b:\n    c: |\n      deep\n        more\n    d: e\n");
        same("a: |\nb: |-\n\nc: x\n");
        same("a:\n  d: |2\n      indented first\n    then\n  e: |-1\n    x\n");
    }

    #[test]
    fn gives_up_on_what_it_does_not_handle() {
        for text in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: >\n  folded\n",
            "a: [1, 2]\n",
            "? a\n: b\n",
            "a:\n\tb: 1\n",
        ] {
            assert_eq!(parse_document(text), None, "{text}");
        }
    }

    #[test]
    fn streams_documents_with_fallback() {
        let text = "---\na: 1\n--- # c\nb: &x 2\n...\n---\nc: [1]\n";
        let full = |t: &str| serde_saphyr::from_multiple::<Value>(t).ok();
        let got = parse_stream(text, full).unwrap();
        assert_eq!(got, [json!({"a": 1}), json!({"b": 2}), json!({"c": [1]})]);
        assert!(parse_stream("a: [\n", full).is_none());
    }

    #[test]
    fn never_panics_on_damaged_input() {
        let base = "a:\n  b: |2\n      x\n    y\n  c:\n  - 'q''r'\n  - \"s\\u00e9\n    t\"\n  - d: e # f\n    g: 1.2.3\n  \u{3000}h: \u{3000}\n";
        let chars: Vec<char> = base.chars().collect();
        let specials = [
            '\n', ' ', '\t', ':', '-', '|', '"', '\'', '#', '\\', '\u{3000}', '{', '[',
        ];
        let mut seed = 7u64;
        for cut in 0..chars.len() {
            let prefix: String = chars[..cut].iter().collect();
            let _ = parse_stream(&prefix, |_| None);
            for _ in 0..3 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let mut damaged = chars.clone();
                damaged[cut] = specials[(seed >> 33) as usize % specials.len()];
                let text: String = damaged.iter().collect();
                let _ = parse_stream(&text, |_| None);
            }
        }
    }

    #[test]
    fn deep_block_nesting_gives_up_instead_of_overflowing() {
        // Found by the property tests: 2000 nested `- ` overflowed the stack.
        assert_eq!(parse_document(&format!("{}1\n", "- ".repeat(2000))), None);
        let nested_maps: String = (0..2000).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        assert_eq!(parse_document(&nested_maps), None);
        let within = format!("{}1\n", "- ".repeat(MAX_DEPTH - 1));
        assert!(parse_document(&within).is_some());
    }

    #[test]
    fn splits_documents() {
        let docs = split_documents("---\na: 1\n--- # c\nb: 2\n...\n").unwrap();
        let parsed: Vec<Value> = docs.iter().filter_map(|d| parse_document(d.text)).collect();
        assert_eq!(
            parsed,
            [Value::Null, json!({"a": 1}), json!({"b": 2}), Value::Null]
        );
        assert!(split_documents("%YAML 1.2\n---\na: 1\n").is_none());
        assert!(split_documents("--- |\n  x\n").is_none());
    }
}
