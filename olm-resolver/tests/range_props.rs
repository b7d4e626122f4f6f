//! Property tests of the version range parser (`olm.skipRange`, `versionRange`) and of the
//! `olm.constraint` reader on generated input.
//!
//! The properties: parsing never panics; a rejected range is an error that quotes the range; an
//! accepted range prints as its text and parses back to the same range; a generated range matches
//! exactly the versions its comparators describe; a rejected constraint is an error about the
//! `olm.constraint`, and a generated constraint tree reads back as that tree.

use olm_resolver::{
    model::{Constraint, ConstraintKind},
    range::{RangeError, VersionRange},
};
use proptest::prelude::*;
use semver::Version;
use serde_json::{Value, json};

/// Text made of range tokens and a few bytes that are not.
fn range_like() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just(" ".to_owned()),
        Just("||".to_owned()),
        Just("|".to_owned()),
        "(>=|<=|>|<|=|==|!=|!|~|\\^|-)",
        "[0-9]{1,3}(\\.[0-9x]{1,2}){0,3}",
        "-[a-z0-9.]{0,6}",
        "\\+[a-z0-9.]{0,6}",
        Just("x".to_owned()),
        Just("*".to_owned()),
        Just("99999999999999999999".to_owned()),
        Just("\t".to_owned()),
        Just("é".to_owned()),
        "[ -~]{1,3}",
    ];
    proptest::collection::vec(token, 0..12).prop_map(|t| t.concat())
}

fn check_range(text: &str) -> Option<VersionRange> {
    match VersionRange::parse(text) {
        Ok(range) => {
            assert_eq!(range.as_str(), text);
            assert_eq!(range.to_string(), text);
            assert_eq!(VersionRange::parse(&range.to_string()).as_ref(), Ok(&range));
            Some(range)
        }
        Err(RangeError::Empty) => {
            assert!(text.chars().all(|c| c == ' '), "{text:?} called empty");
            None
        }
        Err(error) => {
            let message = error.to_string();
            assert!(
                message.contains(&format!("{text:?}")),
                "{message} does not quote {text:?}"
            );
            None
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
        }
    }

    fn holds(self, version: &Version, bound: &Version) -> bool {
        let ordering = version.cmp_precedence(bound);
        match self {
            Op::Eq => ordering.is_eq(),
            Op::Ne => ordering.is_ne(),
            Op::Gt => ordering.is_gt(),
            Op::Ge => ordering.is_ge(),
            Op::Lt => ordering.is_lt(),
            Op::Le => ordering.is_le(),
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Eq),
        Just(Op::Ne),
        Just(Op::Gt),
        Just(Op::Ge),
        Just(Op::Lt),
        Just(Op::Le),
    ]
}

/// Small versions, so that generated versions often meet the bounds; some with pre-release and
/// build parts, some with numbers at the edge of u64.
fn version() -> impl Strategy<Value = Version> {
    let number = prop_oneof![8 => 0u64..4, 1 => Just(u64::MAX)];
    let pre =
        prop_oneof![3 => Just(String::new()), 1 => Just("-rc1".to_owned()), 1 => Just("-alpha.2".to_owned())];
    let build = prop_oneof![3 => Just(String::new()), 1 => Just("+build.7".to_owned())];
    (number.clone(), number.clone(), number, pre, build)
        .prop_map(|(a, b, c, pre, build)| Version::parse(&format!("{a}.{b}.{c}{pre}{build}")).unwrap())
}

type Alternatives = Vec<Vec<(Op, Version, bool)>>;

fn alternatives() -> impl Strategy<Value = Alternatives> {
    let comparator = (op(), version(), any::<bool>());
    proptest::collection::vec(proptest::collection::vec(comparator, 1..4), 1..4)
}

/// The blang spelling of `alternatives`; `spaced` puts a space between operator and version.
fn spell(alternatives: &Alternatives) -> String {
    alternatives
        .iter()
        .map(|all| {
            all.iter()
                .map(|(op, v, spaced)| format!("{}{}{v}", op.text(), if *spaced { " " } else { "" }))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join(" || ")
}

/// A JSON tree made of the constraint vocabulary, valid or not.
fn constraint_like() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("gvk"),
        Just("package"),
        Just("all"),
        Just("any"),
        Just("not"),
        Just("cel"),
        Just("constraints"),
        Just("failureMessage"),
        Just("packageName"),
        Just("versionRange"),
        Just("group"),
        Just("version"),
        Just("kind"),
        Just("rule"),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        Just(Value::from(u64::MAX)),
        range_like().prop_map(Value::String),
        "[a-z.]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 4, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((key.clone(), inner), 0..4).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

/// A valid constraint tree, as JSON.
fn valid_constraint() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        ("[a-z]{1,6}", "v[0-9]", "[A-Z][a-z]{1,6}")
            .prop_map(|(g, v, k)| json!({"gvk": {"group": g, "version": v, "kind": k}})),
        ("[a-z]{1,6}", alternatives())
            .prop_map(|(p, r)| json!({"package": {"packageName": p, "versionRange": spell(&r)}})),
        Just(json!({"package": {"packageName": "bare"}})),
        "[ -~]{0,20}".prop_map(|rule| json!({"cel": {"rule": rule}})),
    ];
    leaf.prop_recursive(4, 32, 4, |inner| {
        (
            prop_oneof![Just("all"), Just("any"), Just("not")],
            proptest::collection::vec(inner, 0..4),
            proptest::option::of("[ -~]{0,12}"),
        )
            .prop_map(|(key, children, message)| {
                let mut value = json!({ key: {"constraints": children} });
                if let Some(m) = message {
                    value["failureMessage"] = Value::String(m);
                }
                value
            })
    })
}

/// The JSON a constraint was read from, rebuilt from what was read.
fn to_json(constraint: &Constraint) -> Value {
    let mut value = match &constraint.kind {
        ConstraintKind::Gvk(gvk) => {
            json!({"gvk": {"group": gvk.group, "version": gvk.version, "kind": gvk.kind}})
        }
        ConstraintKind::Package {
            package,
            range: Some(range),
        } => {
            json!({"package": {"packageName": package, "versionRange": range.as_str()}})
        }
        ConstraintKind::Package { package, range: None } => json!({"package": {"packageName": package}}),
        ConstraintKind::Cel { rule } => json!({"cel": {"rule": rule}}),
        ConstraintKind::All(c) => json!({"all": {"constraints": c.iter().map(to_json).collect::<Vec<_>>()}}),
        ConstraintKind::Any(c) => json!({"any": {"constraints": c.iter().map(to_json).collect::<Vec<_>>()}}),
        ConstraintKind::Not(c) => json!({"not": {"constraints": c.iter().map(to_json).collect::<Vec<_>>()}}),
    };
    if let Some(message) = &constraint.failure_message {
        value["failureMessage"] = Value::String(message.clone());
    }
    value
}

#[test]
fn constraints_nested_as_deep_as_json_allows_read_without_overflow() {
    // serde_json refuses more than 128 levels; `not` takes three per level.
    let mut text = r#"{"cel": {"rule": "true"}}"#.to_owned();
    for _ in 0..40 {
        text = format!(r#"{{"not": {{"constraints": [{text}]}}}}"#);
    }
    let value: Value = serde_json::from_str(&text).unwrap();
    let constraint = Constraint::from_json(&value).unwrap();
    assert_eq!(to_json(&constraint), value);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn range_like_text_parses_or_is_quoted_in_the_error(text in range_like()) {
        check_range(&text);
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,40}") {
        check_range(&text);
    }

    #[test]
    fn generated_ranges_match_what_their_comparators_say(
        alternatives in alternatives(),
        probes in proptest::collection::vec(version(), 1..16),
    ) {
        let text = spell(&alternatives);
        let range = check_range(&text).unwrap_or_else(|| panic!("{text:?} does not parse"));
        for v in &probes {
            let expected = alternatives
                .iter()
                .any(|all| all.iter().all(|(op, bound, _)| op.holds(v, bound)));
            prop_assert_eq!(range.matches(v), expected, "{} against {}", text, v);
        }
    }

    #[test]
    fn wildcards_cover_their_minor_or_major(major in 0u64..5, minor in 0u64..5, patch in 0u64..50) {
        let minor_range = VersionRange::parse(&format!("{major}.{minor}.x")).unwrap();
        let major_range = VersionRange::parse(&format!("{major}.x")).unwrap();
        let inside = Version::new(major, minor, patch);
        prop_assert!(minor_range.matches(&inside) && major_range.matches(&inside));
        prop_assert!(!minor_range.matches(&Version::new(major, minor + 1, 0)));
        prop_assert!(!major_range.matches(&Version::new(major + 1, 0, 0)));
    }

    #[test]
    fn constraint_like_json_is_read_or_refused_naming_it(value in constraint_like()) {
        match Constraint::from_json(&value) {
            Ok(constraint) => {
                let again = Constraint::from_json(&to_json(&constraint));
                prop_assert_eq!(again.as_ref(), Ok(&constraint));
            }
            Err(error) => {
                let message = error.to_string();
                // The error quotes the JSON at fault: the whole value or the child that is wrong.
                prop_assert!(message.starts_with("olm.constraint "), "{}", message);
                let quoted = message["olm.constraint ".len()..].split([':', ' ']).next().unwrap_or("");
                prop_assert!(!quoted.is_empty(), "{}", message);
            }
        }
    }

    #[test]
    fn generated_constraints_read_back(value in valid_constraint()) {
        let constraint = Constraint::from_json(&value)
            .unwrap_or_else(|e| panic!("{value} is refused: {e}"));
        prop_assert_eq!(to_json(&constraint), value);
    }
}
