//! Objects checked against OpenAPI v3 schemas, as the real server does on writes:
//! unknown fields found (reported per `fieldValidation`, and pruned from custom resources),
//! structural defaults applied, and custom resources validated against their CRD's schema
//! (types, enums, required fields, bounds).
//!
//! Schemas are plain JSON: a CRD's `openAPIV3Schema` (inline), or the built-in kinds'
//! schemas from [`crate::openapi`], whose `$ref`s resolve in a definitions map.

use serde_json::{Map, Value};

/// Where `$ref`s point: the `components.schemas` map of an OpenAPI document.
pub type Definitions = Map<String, Value>;

const REF_PREFIX: &str = "#/components/schemas/";

/// One validation failure of a custom resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Field path, `spec.template.capacity`.
    pub field: String,
    /// The upstream-style detail (`Invalid value: ...`, `Required value`, ...).
    pub detail: String,
}

/// A walk over one object.
struct Walk<'a> {
    definitions: &'a Definitions,
    /// Prune unknown fields (custom resources) instead of only reporting them.
    prune: bool,
    unknown: Vec<String>,
    errors: Vec<FieldError>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn quoted(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

impl<'a> Walk<'a> {
    /// Follows `$ref` (with or without sibling keywords, or wrapped in a one-element `allOf`
    /// as OpenAPI 3.0 documents write a reference with a description) to the schema it names.
    fn resolve(&self, schema: &'a Value) -> &'a Value {
        let mut current = schema;
        for _ in 0..32 {
            let reference = current.get("$ref").or_else(|| {
                current
                    .get("allOf")
                    .and_then(Value::as_array)
                    .filter(|all| all.len() == 1)
                    .and_then(|all| all[0].get("$ref"))
            });
            let Some(target) = reference
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(REF_PREFIX))
                .and_then(|name| self.definitions.get(name))
            else {
                break;
            };
            current = target;
        }
        current
    }

    fn error(&mut self, field: &str, detail: String) {
        self.errors.push(FieldError {
            field: field.to_owned(),
            detail,
        });
    }

    /// Checks the scalar type and the value constraints; returns false when the type is
    /// wrong (no descent then).
    fn check_value(&mut self, schema: &Value, value: &mut Value, path: &str) -> bool {
        let actual = type_name(value);
        if value.is_null() && flag(schema, "nullable") {
            return false;
        }
        let int_or_string = flag(schema, "x-kubernetes-int-or-string");
        if int_or_string {
            if !matches!(actual, "integer" | "string") {
                self.error(
                    path,
                    format!(
                        "Invalid value: {}: {path} in body must be of type integer,string: {actual:?}",
                        quoted(value)
                    ),
                );
                return false;
            }
        } else if let Some(expected) = schema.get("type").and_then(Value::as_str) {
            let ok = expected == actual || (expected == "number" && actual == "integer");
            if !ok {
                self.error(
                    path,
                    format!(
                        "Invalid value: {:?}: {path} in body must be of type {expected}: {actual:?}",
                        actual
                    ),
                );
                return false;
            }
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            let list: Vec<String> = allowed.iter().map(quoted).collect();
            self.error(
                path,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    quoted(value),
                    list.join(", ")
                ),
            );
        }
        if let Some(n) = value.as_f64() {
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && n < min
            {
                self.error(
                    path,
                    format!("Invalid value: {value}: {path} in body should be greater than or equal to {min}"),
                );
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && n > max
            {
                self.error(
                    path,
                    format!("Invalid value: {value}: {path} in body should be less than or equal to {max}"),
                );
            }
        }
        if let Some(s) = value.as_str() {
            let len = s.chars().count();
            if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
                && (len as u64) < min
            {
                self.error(
                    path,
                    format!(
                        "Invalid value: {s:?}: {path} in body should be at least {min} chars long"
                    ),
                );
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
                && (len as u64) > max
            {
                self.error(path, format!("Too long: may not be more than {max} bytes"));
            }
        }
        if let Some(items) = value.as_array() {
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
                && items.len() as u64 > max
            {
                self.error(
                    path,
                    format!("Too many: {}: must have at most {max} items", items.len()),
                );
            }
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
                && (items.len() as u64) < min
            {
                self.error(
                    path,
                    format!(
                        "Invalid value: {}: {path} in body should have at least {min} items",
                        items.len()
                    ),
                );
            }
        }
        true
    }

    fn walk(&mut self, schema: &'a Value, value: &mut Value, path: &str, validate: bool) {
        let schema = self.resolve(schema);
        if validate && !self.check_value(schema, value, path) {
            return;
        }
        let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
        match value {
            Value::Object(map) => self.walk_object(schema, map, path, validate, preserve),
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (i, item) in items.iter_mut().enumerate() {
                        self.walk(item_schema, item, &format!("{path}[{i}]"), validate);
                    }
                }
            }
            _ => {}
        }
    }

    fn walk_object(
        &mut self,
        schema: &'a Value,
        map: &mut Map<String, Value>,
        path: &str,
        validate: bool,
        preserve: bool,
    ) {
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties");
        if let Some(properties) = properties {
            for (key, property) in properties {
                if map.contains_key(key) {
                    continue;
                }
                if let Some(default) = self.resolve(property).get("default") {
                    map.insert(key.clone(), default.clone());
                }
            }
        }
        if validate && let Some(required) = schema.get("required").and_then(Value::as_array) {
            for key in required.iter().filter_map(Value::as_str) {
                if !map.contains_key(key) {
                    self.error(&join(path, key), "Required value".into());
                }
            }
        }
        let mut unknown_keys = Vec::new();
        for (key, child) in map.iter_mut() {
            let child_path = join(path, key);
            if let Some(property) = properties.and_then(|p| p.get(key)) {
                self.walk(property, child, &child_path, validate);
            } else if let Some(extra) = additional.filter(|a| a.is_object()) {
                self.walk(extra, child, &child_path, validate);
            } else if additional.and_then(Value::as_bool) == Some(true)
                || preserve
                || (properties.is_none() && additional.is_none())
            {
                // A map of anything, preserved unknown fields, or a schema that says
                // nothing about this object's fields.
            } else {
                unknown_keys.push(key.clone());
            }
        }
        for key in unknown_keys {
            if self.prune {
                map.remove(&key);
            }
            self.unknown.push(join(path, &key));
        }
    }
}

/// What checking an object found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Paths of fields the schema does not declare (pruned when pruning).
    pub unknown: Vec<String>,
    /// Validation failures (only when validating).
    pub errors: Vec<FieldError>,
}

/// Checks `object` (a whole object, `apiVersion` to `status`) against its kind's schema.
///
/// `metadata` is checked against `object_meta` (the ObjectMeta schema) when given; the root's
/// `apiVersion`, `kind` and `metadata` are always known. With `prune`, unknown fields are
/// removed (custom resources); with `validate`, types and constraints are checked too.
/// Defaults declared in the schema are filled in either way.
pub fn check(
    schema: &Value,
    object_meta: Option<&Value>,
    definitions: &Definitions,
    object: &mut Value,
    prune: bool,
    validate: bool,
) -> Checked {
    let mut walk = Walk {
        definitions,
        prune,
        unknown: Vec::new(),
        errors: Vec::new(),
    };
    let Value::Object(root) = object else {
        return Checked::default();
    };
    let schema = walk.resolve(schema);
    let mut metadata = root.remove("metadata");
    let api_version = root.remove("apiVersion");
    let kind = root.remove("kind");
    let mut rest = Value::Object(std::mem::take(root));
    walk.walk(schema, &mut rest, "", validate);
    if let (Some(meta_schema), Some(meta)) = (object_meta, metadata.as_mut()) {
        walk.walk(meta_schema, meta, "metadata", false);
    }
    if let Value::Object(rest) = rest {
        *root = rest;
    }
    for (key, value) in [
        ("apiVersion", api_version),
        ("kind", kind),
        ("metadata", metadata),
    ] {
        if let Some(value) = value {
            root.insert(key.into(), value);
        }
    }
    // The root's own required list names apiVersion/kind/metadata for some kinds; they are
    // the server's to fill in, never a client error.
    walk.errors
        .retain(|e| !matches!(e.field.as_str(), "apiVersion" | "kind" | "metadata"));
    Checked {
        unknown: walk.unknown,
        errors: walk.errors,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["maxSize"],
                    "properties": {
                        "maxSize": {"type": "integer", "format": "int32", "minimum": 0},
                        "priority": {"type": "integer", "default": 0},
                        "capacityType": {"type": "string", "enum": ["reserved", "on-demand", "spot"]},
                        "capacity": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                    }
                },
                "status": {"type": "object", "properties": {"currentSize": {"type": "integer"}}}
            }
        })
    }

    fn object(spec: Value) -> Value {
        json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "a"}, "spec": spec})
    }

    #[test]
    fn unknown_fields_are_pruned_and_reported_with_their_paths() {
        let mut obj = object(json!({"maxSize": 3, "colour": "red", "extra": {"anything": 1}}));
        obj["status"] = json!({"currentSize": 1, "bogus": true});
        let checked = check(&schema(), None, &Definitions::new(), &mut obj, true, true);
        assert_eq!(checked.unknown, vec!["spec.colour", "status.bogus"]);
        assert!(checked.errors.is_empty(), "{:?}", checked.errors);
        assert!(obj["spec"].get("colour").is_none());
        assert_eq!(obj["spec"]["extra"]["anything"], 1, "preserved");
        assert_eq!(obj["spec"]["priority"], 0, "defaulted");
        assert_eq!(obj["metadata"]["name"], "a");
    }

    #[test]
    fn types_enums_bounds_and_required_fields_are_validated() {
        let mut obj =
            object(json!({"maxSize": "lots", "capacityType": "flex", "capacity": {"cpu": 1.5}}));
        let checked = check(&schema(), None, &Definitions::new(), &mut obj, true, true);
        // The order follows the object's keys, which serde_json keeps sorted or in input
        // order depending on workspace features: compare as a set.
        let mut fields: Vec<&str> = checked.errors.iter().map(|e| e.field.as_str()).collect();
        fields.sort_unstable();
        assert_eq!(
            fields,
            vec!["spec.capacity.cpu", "spec.capacityType", "spec.maxSize"],
            "{:?}",
            checked.errors
        );
        let detail = |field: &str| {
            checked
                .errors
                .iter()
                .find(|e| e.field == field)
                .map(|e| e.detail.as_str())
        };
        assert_eq!(
            detail("spec.maxSize"),
            Some(
                "Invalid value: \"string\": spec.maxSize in body must be of type integer: \"string\""
            )
        );
        assert_eq!(
            detail("spec.capacityType"),
            Some(
                "Unsupported value: \"flex\": supported values: \"reserved\", \"on-demand\", \"spot\""
            )
        );
        let mut missing = json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "a"}, "spec": {"maxSize": -1}});
        let checked = check(
            &schema(),
            None,
            &Definitions::new(),
            &mut missing,
            true,
            true,
        );
        assert_eq!(checked.errors.len(), 1);
        assert!(
            checked.errors[0]
                .detail
                .contains("greater than or equal to 0")
        );
    }

    #[test]
    fn refs_resolve_in_the_definitions_and_nothing_is_pruned_when_only_reporting() {
        let mut defs = Definitions::new();
        defs.insert(
            "io.k8s.api.core.v1.PodSpec".into(),
            json!({"type": "object", "properties": {"nodeName": {"type": "string"}}}),
        );
        defs.insert(
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(),
            json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        );
        let pod = json!({"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
            "spec": {"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec", "description": "x"}}});
        let meta =
            json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"});
        let mut obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "nmae": "typo"}, "spec": {"nodeNmae": "n"}});
        let checked = check(&pod, Some(&meta), &defs, &mut obj, false, false);
        assert_eq!(checked.unknown, vec!["spec.nodeNmae", "metadata.nmae"]);
        assert_eq!(obj["spec"]["nodeNmae"], "n", "reported, not pruned");
    }
}
