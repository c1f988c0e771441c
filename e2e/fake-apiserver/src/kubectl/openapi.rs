//! The OpenAPI v3 documents kubectl reads (`/openapi/v3` and
//! `/openapi/v3/<api|apis/group>/<version>`).
//!
//! kubectl (1.27+) reads a group-version's document before it sends a create or a patch: when
//! the PATCH operation of the kind lists the `fieldValidation` query parameter, it leaves
//! validation to the server and sends `fieldValidation=Strict` (what it does against every
//! real 1.27+ server), else it falls back to OpenAPI v2 client-side validation. So each
//! document has the operations of its resources (with the `x-kubernetes-group-version-kind`
//! and `x-kubernetes-action` extensions and the query parameters upstream lists) and the
//! schemas of its kinds, the ones [`crate::openapi`] validates writes with.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::openapi::{REF_PREFIX, builtins, object_meta_schema};
use crate::resource::{Registry, ResourceDef};
use crate::schema::Definitions;

/// Upstream's definition name of a custom resource kind: the group reversed, then version and
/// kind (`dra-autoscaler.io` → `io.dra-autoscaler.v1alpha1.NodeGroup`).
fn custom_definition_name(def: &ResourceDef) -> String {
    let reversed: Vec<&str> = def.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), def.version, def.kind)
}

/// The `(definition name, schema)` of `def`'s kind in its group-version document.
fn kind_definition(def: &ResourceDef) -> Option<(String, Value)> {
    let builtins = builtins();
    if let Some(schema) = &def.schema {
        let mut root = (**schema).clone();
        if let Some(map) = root.as_object_mut() {
            let properties = map
                .entry("properties")
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .map(std::mem::take)
                .unwrap_or_default();
            let mut with_meta = Map::new();
            with_meta.insert("apiVersion".into(), json!({"type": "string"}));
            with_meta.insert("kind".into(), json!({"type": "string"}));
            with_meta.insert("metadata".into(), object_meta_schema());
            with_meta.extend(properties);
            map.insert("properties".into(), Value::Object(with_meta));
            map.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": def.group, "version": def.version, "kind": def.kind}]),
            );
        }
        return Some((custom_definition_name(def), root));
    }
    let name = builtins
        .roots
        .get(&(def.group.clone(), def.version.clone(), def.kind.clone()))?;
    let schema = builtins.definitions.get(name)?.clone();
    Some((name.clone(), schema))
}

/// Adds to `out` every definition reachable from `schema` through `$ref`s.
fn collect_refs(schema: &Value, definitions: &Definitions, out: &mut Map<String, Value>) {
    match schema {
        Value::Object(map) => {
            if let Some(name) = map
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix(REF_PREFIX))
                && !out.contains_key(name)
                && let Some(target) = definitions.get(name)
            {
                out.insert(name.to_owned(), target.clone());
                collect_refs(target, definitions, out);
            }
            for value in map.values() {
                collect_refs(value, definitions, out);
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| collect_refs(item, definitions, out)),
        _ => {}
    }
}

fn query(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn write_parameters() -> Vec<Value> {
    vec![
        query(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
        ),
        query(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        query(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: Ignore, Warn (the default) and Strict.",
        ),
    ]
}

fn operation(def: &ResourceDef, action: &str, id: &str, schema_ref: &Value, write: bool) -> Value {
    let mut op = json!({
        "operationId": id,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": def.group, "version": def.version, "kind": def.kind},
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema_ref}}}},
    });
    if write {
        op["parameters"] = Value::Array(write_parameters());
        op["requestBody"] = json!({"content": {"*/*": {"schema": schema_ref}}, "required": true});
    }
    op
}

fn add_paths(def: &ResourceDef, definition: &str, paths: &mut Map<String, Value>) {
    let prefix = if def.group.is_empty() {
        format!("/api/{}", def.version)
    } else {
        format!("/apis/{}/{}", def.group, def.version)
    };
    let collection = if def.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", def.plural)
    } else {
        format!("{prefix}/{}", def.plural)
    };
    let one = json!({"$ref": format!("{REF_PREFIX}{definition}")});
    let list = json!({"type": "object"});
    let id = |verb: &str| format!("{verb}{}", def.kind);
    let mut path_params =
        vec![json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}})];
    if def.namespaced {
        path_params.push(json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}}));
    }
    paths.insert(
        collection.clone(),
        json!({
            "get": operation(def, "list", &id("list"), &list, false),
            "post": operation(def, "post", &id("create"), &one, true),
            "parameters": path_params[1..].to_vec(),
        }),
    );
    paths.insert(
        format!("{collection}/{{name}}"),
        json!({
            "get": operation(def, "get", &id("read"), &one, false),
            "put": operation(def, "put", &id("replace"), &one, true),
            "patch": operation(def, "patch", &id("patch"), &one, true),
            "delete": operation(def, "delete", &id("delete"), &json!({"type": "object"}), false),
            "parameters": path_params,
        }),
    );
    for sub in def.subresources() {
        if sub == "status" {
            paths.insert(
                format!("{collection}/{{name}}/status"),
                json!({
                    "get": operation(def, "get", &id("read_status"), &one, false),
                    "put": operation(def, "put", &id("replace_status"), &one, true),
                    "patch": operation(def, "patch", &id("patch_status"), &one, true),
                }),
            );
        }
    }
}

/// The document of one group-version (`group` empty for the core group).
///
/// # Errors
/// 404 when nothing is served there.
pub fn group_version(
    registry: &Registry,
    group: &str,
    version: &str,
    kube_version: &str,
) -> Result<Value, ApiError> {
    let defs: Vec<&ResourceDef> = registry
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .collect();
    if defs.is_empty() {
        return Err(ApiError::UnknownResource);
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    let definitions = &builtins().definitions;
    for def in defs {
        let (name, schema) = kind_definition(def).unwrap_or_else(|| {
            (
                custom_definition_name(def),
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                       "x-kubernetes-group-version-kind": [{"group": def.group, "version": def.version, "kind": def.kind}]}),
            )
        });
        collect_refs(&schema, definitions, &mut schemas);
        add_paths(def, &name, &mut paths);
        schemas.insert(name, schema);
    }
    collect_refs(&object_meta_schema(), definitions, &mut schemas);
    Ok(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": kube_version},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// The path a group-version's document is served at, without the leading `/openapi/v3/`.
fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn hash(doc: &Value) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    doc.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// `/openapi/v3`: every group-version's document, with a hash that changes with it (clients
/// cache documents by URL).
pub fn index(registry: &Registry, kube_version: &str) -> Value {
    let gvs: BTreeSet<(String, String)> = registry
        .iter()
        .map(|d| (d.group.clone(), d.version.clone()))
        .collect();
    let mut paths = Map::new();
    for (group, version) in gvs {
        let path = gv_path(&group, &version);
        let hash = group_version(registry, &group, &version, kube_version)
            .map(|doc| hash(&doc))
            .unwrap_or_default();
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}")}),
        );
    }
    json!({"paths": paths})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openapi::OBJECT_META;

    #[test]
    fn built_in_kinds_have_upstream_definition_names_and_their_gvk() {
        let registry = Registry::builtins();
        let doc = group_version(&registry, "", "v1", "v1.37.0").expect("core served");
        let pod = &doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"][0]["kind"], "Pod",
            "{pod}"
        );
        assert!(doc["components"]["schemas"][OBJECT_META].is_object());
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Pod");
        let params: Vec<&str> = patch["parameters"]
            .as_array()
            .expect("parameters")
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(params.contains(&"fieldValidation"), "{params:?}");
        assert!(doc["paths"]["/api/v1/nodes/{name}"].is_object());
    }

    #[test]
    fn the_index_lists_every_group_version_with_a_hash() {
        let index = index(&Registry::builtins(), "v1.37.0");
        let url = index["paths"]["apis/resource.k8s.io/v1"]["serverRelativeURL"]
            .as_str()
            .expect("listed");
        assert!(
            url.starts_with("/openapi/v3/apis/resource.k8s.io/v1?hash="),
            "{url}"
        );
        assert!(index["paths"]["api/v1"].is_object());
    }

    #[test]
    fn custom_resources_use_the_crd_schema_under_the_reversed_group_name() {
        let mut def = ResourceDef::new(
            "dra-autoscaler.io",
            "v1alpha1",
            "nodegroups",
            "NodeGroup",
            false,
            true,
        );
        def.schema = Some(std::sync::Arc::new(
            json!({"type": "object", "properties": {"spec": {"type": "object"}}}),
        ));
        let mut registry = Registry::default();
        registry.insert(def);
        let doc =
            group_version(&registry, "dra-autoscaler.io", "v1alpha1", "v1.37.0").expect("served");
        let schema = &doc["components"]["schemas"]["io.dra-autoscaler.v1alpha1.NodeGroup"];
        assert_eq!(
            schema["properties"]["metadata"]["$ref"],
            format!("{REF_PREFIX}{OBJECT_META}")
        );
        assert!(schema["properties"]["spec"].is_object());
        assert!(doc["components"]["schemas"][OBJECT_META].is_object());
    }
}
