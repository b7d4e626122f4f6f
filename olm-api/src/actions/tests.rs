use serde_json::json;

use super::*;

const BACKUP: &str = r#"
backup:
  description: Write a backup of the database.
  params:
    path: {type: string, description: Where to write it., minLength: 1, maxLength: 12}
    level: {type: integer, minimum: 1, maximum: 9}
    mode: {type: string, enum: [full, incremental]}
    compression:
      type: object
      properties:
        kind: {type: string, enum: [gzip, xz]}
      required: [kind]
      additionalProperties: false
    tags: {type: array, items: {type: string}}
  required: [path]
pause:
  description: Stop serving writes.
loose:
  description: Takes anything.
  params:
    known: {type: [string, "null"]}
  additionalProperties: true
"#;

fn backup() -> Actions {
    Actions::parse("demo.v1.0.0", BACKUP).unwrap()
}

#[test]
fn declarations_parse_from_yaml_and_json() {
    let actions = backup();
    let names: Vec<&str> = actions.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["backup", "loose", "pause"]);
    let b = actions.get("backup").unwrap();
    assert_eq!(b.description, "Write a backup of the database.");
    assert_eq!(b.required, ["path"]);
    assert!(!b.additional_properties, "additionalProperties defaults to false");
    assert!(b.requires("path") && !b.requires("level"));
    assert_eq!(
        b.params["level"],
        json!({"type": "integer", "minimum": 1, "maximum": 9})
    );
    assert!(actions.get("loose").unwrap().additional_properties);
    let pause = actions.get("pause").unwrap();
    assert!(pause.params.is_empty() && pause.required.is_empty());
    assert_eq!(
        pause.schema(),
        json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
    );

    let json_text = r#"{"rotate-certs": {"description": "Rotate.", "type": "object", "params": {"days": {"type": "integer"}}}}"#;
    let rotate = Actions::parse("demo.v1.0.0", json_text).unwrap();
    assert_eq!(rotate.get("rotate-certs").unwrap().params.len(), 1);
    assert_eq!(Actions::parse("demo.v1.0.0", " \n").unwrap(), Actions::default());
    assert_eq!(Actions::parse("demo.v1.0.0", "{}").unwrap(), Actions::default());
}

#[test]
fn bad_declarations_are_named() {
    let cases: &[(&str, &str, &str)] = &[
        ("not yaml", "backup: [", "not YAML or JSON"),
        (
            "a list",
            "- backup",
            r#"at `.`: expected a map, found ["backup"]"#,
        ),
        (
            "action a list",
            "backup: [a]",
            r#"at `backup`: expected a map, found ["a"]"#,
        ),
        (
            "action empty",
            "backup:",
            "at `backup`: expected a map, found null",
        ),
        (
            "unknown field",
            "backup: {descripton: x}",
            "unknown field `descripton`",
        ),
        ("parallel", "backup: {parallel: true}", "unknown field `parallel`"),
        ("params a list", "backup: {params: [path]}", "at `backup.params`:"),
        ("same action twice", "a: {}\na: {}\n", "not YAML or JSON"),
        (
            "uppercase name",
            "Backup: {}",
            r#"action name "Backup" is not valid"#,
        ),
        (
            "underscore",
            "back_up: {}",
            r#"action name "back_up" is not valid"#,
        ),
        ("digit", "backup2: {}", r#"action name "backup2" is not valid"#),
        (
            "ends in -",
            "backup-: {}",
            r#"action name "backup-" is not valid"#,
        ),
        (
            "top type",
            "backup: {type: string}",
            r#"action "backup": parameter schema at `type`: the parameters of an action are an object, found type "string""#,
        ),
        (
            "param not a map",
            "backup: {params: {path: string}}",
            r#"action "backup": parameter schema at `params.path`: expected a JSON Schema (a map such as {type: string}), found "string""#,
        ),
        (
            "unknown type",
            "backup: {params: {path: {type: text}}}",
            r#"at `params.path.type`: unknown type "text""#,
        ),
        (
            "empty type list",
            "backup: {params: {path: {type: []}}}",
            "at `params.path.type`: unknown type []",
        ),
        (
            "properties a list",
            "backup: {params: {c: {type: object, properties: [kind]}}}",
            "at `params.c.properties`: properties must be a map",
        ),
        (
            "nested property not a schema",
            "backup: {params: {c: {properties: {kind: 3}}}}",
            "at `params.c.properties.kind`: expected a JSON Schema",
        ),
        (
            "required not declared",
            "backup: {params: {path: {type: string}}, required: [pth]}",
            r#"action "backup": parameter schema at `required`: "pth" is required but not declared"#,
        ),
        (
            "nested required not declared",
            "backup: {params: {c: {type: object, properties: {kind: {}}, required: [level]}}}",
            r#"at `params.c.required`: "level" is required but not declared"#,
        ),
        (
            "nested required not a list",
            "backup: {params: {c: {type: object, required: kind}}}",
            "at `params.c.required`: required must be a list",
        ),
        (
            "minLength negative",
            "backup: {params: {path: {minLength: -1}}}",
            "at `params.path.minLength`: minLength must be a whole number",
        ),
        (
            "maximum not a number",
            "backup: {params: {n: {maximum: ten}}}",
            "at `params.n.maximum`: maximum must be a number",
        ),
        (
            "enum not a list",
            "backup: {params: {m: {enum: full}}}",
            "at `params.m.enum`: enum must be a list",
        ),
        (
            "additionalProperties of a param",
            "backup: {params: {c: {additionalProperties: no-thanks}}}",
            "at `params.c.additionalProperties`: additionalProperties must be true, false or a JSON Schema",
        ),
        (
            "items not a schema",
            "backup: {params: {t: {type: array, items: string}}}",
            "at `params.t.items`: expected a JSON Schema",
        ),
        (
            "additionalProperties of the action",
            "backup: {additionalProperties: maybe}",
            "at `backup.additionalProperties`:",
        ),
    ];
    for (what, text, want) in cases {
        let err = Actions::parse("demo.v1.0.0", text).expect_err(what).to_string();
        assert!(
            err.starts_with("CSV demo.v1.0.0: annotation olm-rs.dev/actions: "),
            "{what}: {err}"
        );
        assert!(err.contains(want), "{what}: {err}");
    }
}

#[test]
fn a_catalog_property_is_read_as_the_annotation_is() {
    let value = json!({"pause": {"description": "Stop."}});
    let actions = Actions::from_value("demo.v1.0.0", Declared::Property, value.clone()).unwrap();
    assert_eq!(actions.get("pause").unwrap().description, "Stop.");
    assert_eq!(property_value("pause: {description: Stop.}"), Some(value));
    assert_eq!(property_value(" "), None);
    assert_eq!(property_value("pause: ["), Some(Value::String("pause: [".into())));
    let err = Actions::from_value(
        "demo.v1.0.0",
        Declared::Property,
        Value::String("pause: [".into()),
    )
    .unwrap_err();
    assert!(matches!(err.cause, ActionsCause::Syntax(_)), "{err}");
    let err = Actions::from_value("demo.v1.0.0", Declared::Property, json!({"Pause": {}})).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"CSV demo.v1.0.0: property olm-rs.actions: action name "Pause" is not valid; use lowercase letters and '-', starting and ending with a letter, at most 63 characters"#
    );
}

#[test]
fn annotations_without_the_declaration_declare_nothing() {
    let other: BTreeMap<String, String> = [("olm.skipRange".to_owned(), "<1.0.0".to_owned())].into();
    assert_eq!(Actions::of_annotations("demo", &other), Ok(None));
    let declared: BTreeMap<String, String> =
        [(ANNOTATION.to_owned(), "pause: {description: Stop.}".to_owned())].into();
    let actions = Actions::of_annotations("demo", &declared).unwrap().unwrap();
    assert!(!actions.is_empty());
}

#[test]
fn parameters_that_fit_the_schema_pass() {
    let actions = backup();
    let cases: &[(&str, &str, Value)] = &[
        ("only the required", "backup", json!({"path": "/srv"})),
        (
            "every parameter",
            "backup",
            json!({"path": "/srv/b", "level": 9, "mode": "full", "compression": {"kind": "xz"}, "tags": ["a", "b"]}),
        ),
        (
            "an integer written as 2.0",
            "backup",
            json!({"path": "/srv", "level": 2.0}),
        ),
        ("a length in characters", "backup", json!({"path": "ééééééééééé"})),
        ("no parameters", "pause", json!({})),
        ("additional allowed", "loose", json!({"known": null, "other": 3})),
    ];
    for (what, action, params) in cases {
        let action = actions.get(action).unwrap();
        assert_eq!(validate_params(action, params), Ok(()), "{what}");
    }
}

#[test]
fn parameters_that_do_not_fit_are_named() {
    let actions = backup();
    let cases: &[(&str, &str, Value, &str)] = &[
        (
            "not an object",
            "backup",
            json!("path=/srv"),
            r#"parameter `.`: expected object, found "path=/srv""#,
        ),
        (
            "missing",
            "backup",
            json!({}),
            "parameter `path`: is required; give it",
        ),
        (
            "wrong type",
            "backup",
            json!({"path": 3}),
            "parameter `path`: expected string, found 3",
        ),
        (
            "not an integer",
            "backup",
            json!({"path": "p", "level": 1.5}),
            "parameter `level`: expected integer, found 1.5",
        ),
        (
            "below minimum",
            "backup",
            json!({"path": "p", "level": 0}),
            "parameter `level`: 0 is less than the minimum 1",
        ),
        (
            "above maximum",
            "backup",
            json!({"path": "p", "level": 10}),
            "parameter `level`: 10 is more than the maximum 9",
        ),
        (
            "too short",
            "backup",
            json!({"path": ""}),
            "parameter `path`: is 0 characters long, shorter than minLength 1",
        ),
        (
            "too long",
            "backup",
            json!({"path": "/a/very/long/path"}),
            "parameter `path`: is 17 characters long, longer than maxLength 12",
        ),
        (
            "not in enum",
            "backup",
            json!({"path": "p", "mode": "partial"}),
            r#"parameter `mode`: "partial" is not one of ["full","incremental"]"#,
        ),
        (
            "unexpected",
            "backup",
            json!({"path": "p", "pth": "q"}),
            "parameter `pth`: is not a parameter of this action",
        ),
        (
            "nested missing",
            "backup",
            json!({"path": "p", "compression": {}}),
            "parameter `compression.kind`: is required",
        ),
        (
            "nested unexpected",
            "backup",
            json!({"path": "p", "compression": {"kind": "xz", "level": 3}}),
            "parameter `compression.level`: is not a parameter",
        ),
        (
            "array item",
            "backup",
            json!({"path": "p", "tags": ["a", 2]}),
            "parameter `tags[1]`: expected string, found 2",
        ),
        (
            "any parameter of pause",
            "pause",
            json!({"now": true}),
            "parameter `now`: is not a parameter",
        ),
        (
            "a list of types",
            "loose",
            json!({"known": 1}),
            "parameter `known`: expected string or null, found 1",
        ),
    ];
    for (what, name, params, want) in cases {
        let err = validate_params(actions.get(name).unwrap(), params)
            .expect_err(what)
            .to_string();
        assert!(err.starts_with(&format!("action {name:?}: ")), "{what}: {err}");
        assert!(err.contains(want), "{what}: {err}");
    }
}

#[test]
fn an_action_names_the_command_of_its_job_and_an_empty_one_is_refused() {
    let text = "backup: {job: {command: [/manager, backup], deployment: db, container: manager}}\npause: {}";
    let actions = Actions::parse("demo.v1.0.0", text).unwrap();
    assert_eq!(
        actions.get("backup").unwrap().job,
        Some(JobSpec {
            command: vec!["/manager".into(), "backup".into()],
            deployment: Some("db".into()),
            container: Some("manager".into()),
        })
    );
    assert_eq!(actions.get("pause").unwrap().job, None);
    let defaults = Actions::parse("demo.v1.0.0", "backup: {job: {command: [run]}}").unwrap();
    let job = defaults.get("backup").unwrap().job.clone().unwrap();
    assert_eq!((job.deployment, job.container), (None, None));

    let empty = Actions::parse("demo.v1.0.0", "backup: {job: {command: []}}").unwrap_err();
    assert!(
        empty.to_string().contains("backup.job.command") && empty.to_string().contains("empty"),
        "{empty}"
    );
    let unknown = Actions::parse("demo.v1.0.0", "backup: {job: {command: [run], image: x}}").unwrap_err();
    assert!(unknown.to_string().contains("image"), "{unknown}");
}
