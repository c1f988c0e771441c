//! Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get`.
//!
//! kubectl asks with `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints the
//! columns the server chose: upstream's printers for built-in kinds ([`super::printers`]),
//! the CRD's `additionalPrinterColumns` for custom resources, and `Name`/`Created At` for the
//! rest. Rows carry the object's metadata (`includeObject=Metadata`, the default) or the
//! whole object (`includeObject=Object`), which kubectl needs for `-A`, `-L` and sorting.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::cells::{Column, age};
use super::printers;
use crate::resource::ResourceDef;

/// What a Table row carries besides its cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// The `includeObject` query parameter (default `Metadata`).
    pub fn from_param(param: Option<&str>) -> Self {
        match param {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

/// Whether an `Accept` header asks for a Table (kubectl lists the Table first, then plain
/// JSON as the fallback).
pub fn wants_table(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|media| {
            let params: Vec<&str> = media.split(';').map(str::trim).collect();
            params.contains(&"as=Table")
                && params.contains(&"g=meta.k8s.io")
                && (params.contains(&"v=v1") || params.contains(&"v=v1beta1"))
        })
    })
}

/// Follows a simple JSONPath (`.spec.replicas`, `.status.conditions[0].type`,
/// `.status.conditions[?(@.type=="Ready")].status`) as CRD printer columns use them.
pub fn json_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut current = object;
    let mut rest = path.trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            current = current.get(&after[..end])?;
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            let selector = &after[..end];
            rest = &after[end + 1..];
            let items = current.as_array()?;
            current = if let Some(filter) = selector.strip_prefix("?(@.") {
                let filter = filter.trim_end_matches(')');
                let (field, wanted) = filter.split_once("==")?;
                let wanted = wanted.trim().trim_matches('"').trim_matches('\'');
                items
                    .iter()
                    .find(|item| item.get(field.trim()).and_then(Value::as_str) == Some(wanted))?
            } else {
                items.get(selector.trim().parse::<usize>().ok()?)?
            };
        } else {
            return None;
        }
    }
    Some(current)
}

/// A CRD printer column cell, as upstream's `cellForJSONValue` types it.
fn custom_cell(type_: &str, value: Option<&Value>, now: Timestamp) -> Value {
    let Some(value) = value else {
        return Value::Null;
    };
    match type_ {
        "integer" => value.as_i64().map_or(Value::Null, Value::from),
        "number" => value.as_f64().map_or(Value::Null, Value::from),
        "boolean" => value.as_bool().map_or(Value::Null, Value::from),
        "date" => match value.as_str() {
            Some(t) if t.parse::<Timestamp>().is_ok() => Value::from(age(Some(t), now)),
            Some(_) => Value::from("<invalid>"),
            None => Value::Null,
        },
        _ => match value {
            Value::String(s) => Value::from(s.clone()),
            other => Value::from(other.to_string()),
        },
    }
}

/// The columns and the cells of one object for `def`.
fn columns_and_cells(
    def: &ResourceDef,
    object: &Value,
    now: Timestamp,
) -> (Vec<Value>, Vec<Value>) {
    let name = object
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or(Value::Null);
    if def.crd.is_some() {
        let mut columns = vec![Column::name().to_json()];
        let mut cells = vec![name];
        for c in &def.printer_columns {
            columns.push(json!({
                "name": c.name, "type": c.type_, "format": c.format,
                "description": c.description, "priority": c.priority,
            }));
            cells.push(custom_cell(&c.type_, json_path(object, &c.json_path), now));
        }
        return (columns, cells);
    }
    if let Some((columns, cells)) = printers::print(&def.group, &def.kind, object, now) {
        return (columns.iter().map(Column::to_json).collect(), cells);
    }
    let created = Column {
        name: "Created At",
        type_: "date",
        format: "",
        priority: 0,
        description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
    };
    (
        vec![Column::name().to_json(), created.to_json()],
        vec![
            name,
            object
                .pointer("/metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null),
        ],
    )
}

fn row_object(object: &Value, include: IncludeObject) -> Option<Value> {
    match include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(crate::object::partial_metadata(object)),
        IncludeObject::Object => Some(object.clone()),
    }
}

/// A Table of `objects` at list resourceVersion `rv`; `headers: false` leaves the column
/// definitions out (watch events after the first, as upstream sends them).
pub fn table(
    def: &ResourceDef,
    objects: &[Value],
    rv: Option<u64>,
    include: IncludeObject,
    headers: bool,
    now: Timestamp,
) -> Value {
    let mut column_definitions = Vec::new();
    let mut rows = Vec::new();
    for object in objects {
        let (columns, cells) = columns_and_cells(def, object, now);
        if column_definitions.is_empty() {
            column_definitions = columns;
        }
        let mut row = json!({"cells": cells});
        if let Some(embedded) = row_object(object, include) {
            row["object"] = embedded;
        }
        rows.push(row);
    }
    if column_definitions.is_empty() {
        // An empty list still has headers: take them from an empty object.
        column_definitions = columns_and_cells(def, &json!({}), now).0;
    }
    let mut metadata = json!({});
    if let Some(rv) = rv {
        metadata["resourceVersion"] = Value::from(rv.to_string());
    }
    let mut out = json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "rows": rows,
    });
    if headers {
        out["columnDefinitions"] = Value::Array(column_definitions);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::PrinterColumn;

    #[test]
    fn json_paths_of_printer_columns() {
        let obj = json!({"spec": {"minSize": 1}, "status": {"conditions": [
            {"type": "Valid", "status": "True"}, {"type": "Backoff", "status": "False"}]}});
        assert_eq!(json_path(&obj, ".spec.minSize"), Some(&json!(1)));
        assert_eq!(
            json_path(&obj, ".status.conditions[1].type"),
            Some(&json!("Backoff"))
        );
        assert_eq!(
            json_path(&obj, ".status.conditions[?(@.type==\"Backoff\")].status"),
            Some(&json!("False"))
        );
        assert_eq!(json_path(&obj, ".status.reservedLeft"), None);
    }

    #[test]
    fn custom_resources_print_name_and_their_columns_typed() {
        let mut def = ResourceDef::new("x.io", "v1", "things", "Thing", false, true);
        def.crd = Some("things.x.io".into());
        def.printer_columns = vec![
            PrinterColumn {
                name: "Max".into(),
                type_: "integer".into(),
                format: String::new(),
                description: String::new(),
                priority: 0,
                json_path: ".spec.maxSize".into(),
            },
            PrinterColumn {
                name: "Until".into(),
                type_: "date".into(),
                format: String::new(),
                description: String::new(),
                priority: 0,
                json_path: ".status.backoffUntil".into(),
            },
        ];
        let now: Timestamp = "2026-01-01T01:00:00Z".parse().expect("time");
        let obj = json!({"metadata": {"name": "a"}, "spec": {"maxSize": 8}, "status": {"backoffUntil": "2026-01-01T00:00:00Z"}});
        let t = table(&def, &[obj], Some(7), IncludeObject::Metadata, true, now);
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .expect("columns")
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, vec!["Name", "Max", "Until"]);
        assert_eq!(t["rows"][0]["cells"], json!(["a", 8, "60m"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        let empty = table(&def, &[], None, IncludeObject::None, true, now);
        assert_eq!(empty["columnDefinitions"].as_array().map(Vec::len), Some(3));
    }

    #[test]
    fn table_accept_headers_are_recognised() {
        assert!(wants_table(Some(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        )));
        assert!(!wants_table(Some("application/json")));
        assert!(!wants_table(None));
    }
}
