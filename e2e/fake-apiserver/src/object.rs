//! Pure object preparation: what the real server's `BeforeCreate`/`BeforeUpdate` and
//! the per-resource strategies do to a request body before it is stored.
//!
//! Nothing here touches the store; the store stamps `resourceVersion` and emits
//! watch events after these functions have produced the candidate object.

use serde_json::{Map, Value, json};

use crate::{
    error::ApiError,
    resource::{ResourceDef, StatusOnCreate},
};

/// Which part of an object a write targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The main resource: `.status` is ignored when a status subresource exists.
    Main,
    /// The `/status` subresource: only `.status` changes.
    Status,
}

/// Reads a string field of `.metadata`.
pub fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// Runs `f` on the object's `.metadata` map, creating it if missing (a non-map
/// `.metadata` is replaced; [`check_body`] rejects those before we get here).
pub fn with_meta<R>(object: &mut Value, f: impl FnOnce(&mut Map<String, Value>) -> R) -> R {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let mut meta = match object
        .as_object_mut()
        .and_then(|root| root.remove("metadata"))
    {
        Some(Value::Object(meta)) => meta,
        _ => Map::new(),
    };
    let result = f(&mut meta);
    if let Some(root) = object.as_object_mut() {
        root.insert("metadata".into(), Value::Object(meta));
    }
    result
}

/// The finalizers of an object (empty when unset).
pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a delete has been requested and is waiting on finalizers.
pub fn is_terminating(object: &Value) -> bool {
    meta_str(object, "deletionTimestamp").is_some()
}

/// Removes `null` members of maps, recursively.
///
/// The real server decodes into typed structs (or prunes CRD bodies), so an explicit
/// `null` and an absent field are the same object. Normalising here makes no-op
/// detection agree with it.
pub fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn bad_type(def: &ResourceDef, field: &str, expected: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "unable to decode {} body: {field} must be {expected}",
        def.kind
    ))
}

/// Checks the shape of a request body: a JSON object whose `apiVersion` and `kind`,
/// when set, name this resource, and whose metadata fields have the right types.
pub fn check_body(def: &ResourceDef, body: &Value) -> Result<(), ApiError> {
    let Some(root) = body.as_object() else {
        return Err(bad_type(def, "the body", "a JSON object"));
    };
    let api_version = def.api_version();
    if let Some(v) = root.get("apiVersion").and_then(Value::as_str)
        && v != api_version
    {
        return Err(ApiError::BadRequest(format!(
            "the API version in the data ({v}) does not match the expected API version ({api_version})"
        )));
    }
    if let Some(k) = root.get("kind").and_then(Value::as_str)
        && k != def.kind
    {
        return Err(ApiError::BadRequest(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            def.kind
        )));
    }
    let Some(meta) = root.get("metadata") else {
        return Ok(());
    };
    let Some(meta) = meta.as_object() else {
        return Err(bad_type(def, "metadata", "an object"));
    };
    for field in [
        "name",
        "generateName",
        "namespace",
        "resourceVersion",
        "uid",
    ] {
        if meta
            .get(field)
            .is_some_and(|v| !v.is_string() && !v.is_null())
        {
            return Err(bad_type(def, &format!("metadata.{field}"), "a string"));
        }
    }
    for field in ["labels", "annotations"] {
        match meta.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) if map.values().all(Value::is_string) => {}
            Some(_) => {
                return Err(bad_type(
                    def,
                    &format!("metadata.{field}"),
                    "a map of strings",
                ));
            }
        }
    }
    match meta.get("finalizers") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => Ok(()),
        Some(_) => Err(bad_type(def, "metadata.finalizers", "a list of strings")),
    }
}

/// DNS-1123 subdomain (most names) or label (namespaces), as `ValidateObjectMeta` checks.
fn name_problem(name: &str, label_only: bool) -> Option<String> {
    let max = if label_only { 63 } else { 253 };
    if name.len() > max {
        return Some(format!("must be no more than {max} characters"));
    }
    let valid_part = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !part.starts_with('-')
            && !part.ends_with('-')
    };
    let ok = if label_only {
        valid_part(name)
    } else {
        name.split('.').all(valid_part)
    };
    (!ok).then(|| {
        format!(
            "a lowercase RFC 1123 {} must consist of lower case alphanumeric characters, '-'{}, and must start and end with an alphanumeric character",
            if label_only { "label" } else { "subdomain" },
            if label_only { "" } else { " or '.'" },
        )
    })
}

fn invalid(def: &ResourceDef, name: &str, field: &str, detail: String) -> ApiError {
    ApiError::Invalid {
        kind: def.kind.clone(),
        name: name.to_owned(),
        field: field.to_owned(),
        detail,
    }
}

/// Checks the namespace of a body against the request path and fills it in.
fn settle_namespace(
    def: &ResourceDef,
    meta: &mut Map<String, Value>,
    path_namespace: Option<&str>,
) -> Result<(), ApiError> {
    if !def.namespaced {
        // The real server clears a namespace sent for a cluster-scoped object.
        meta.remove("namespace");
        return Ok(());
    }
    let Some(path_ns) = path_namespace else {
        return Err(ApiError::BadRequest(format!(
            "{} is namespaced: the request must name a namespace",
            def.group_resource()
        )));
    };
    match meta.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() && ns != path_ns => Err(ApiError::BadRequest(format!(
            "the namespace of the provided object ({ns}) does not match the namespace sent on the request ({path_ns})"
        ))),
        _ => {
            meta.insert("namespace".into(), Value::String(path_ns.to_owned()));
            Ok(())
        }
    }
}

/// Turns a create body into the object to store, minus the fields the store stamps
/// (`uid`, `resourceVersion`, `creationTimestamp`, `generation`).
///
/// `name_suffix` produces the random part of a `generateName` name.
pub fn prepare_create(
    def: &ResourceDef,
    path_namespace: Option<&str>,
    mut body: Value,
    name_suffix: impl FnOnce() -> String,
) -> Result<Value, ApiError> {
    check_body(def, &body)?;
    strip_nulls(&mut body);
    if let Some(root) = body.as_object_mut() {
        root.insert("apiVersion".into(), Value::String(def.api_version()));
        root.insert("kind".into(), Value::String(def.kind.clone()));
    }
    with_meta(&mut body, |meta| {
        create_meta(def, meta, path_namespace, name_suffix)
    })?;
    if let Some(root) = body.as_object_mut() {
        match &def.status_on_create {
            StatusOnCreate::Keep => {}
            StatusOnCreate::Clear => {
                root.remove("status");
            }
            StatusOnCreate::Reset(status) => {
                root.insert("status".into(), status.clone());
            }
        }
    }
    Ok(body)
}

/// The metadata half of [`prepare_create`].
fn create_meta(
    def: &ResourceDef,
    meta: &mut Map<String, Value>,
    path_namespace: Option<&str>,
    name_suffix: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    settle_namespace(def, meta, path_namespace)?;
    let rv_set = meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse::<u64>().ok())
        .is_some_and(|rv| rv != 0);
    if rv_set {
        // Upstream's storage layer refuses this with a 500, and clients have learned
        // to strip it; keep them honest.
        return Err(ApiError::Internal(
            "resourceVersion should not be set on objects to be created".into(),
        ));
    }
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let name = if name.is_empty() {
        match meta.get("generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => format!("{prefix}{}", name_suffix()),
            _ => {
                return Err(invalid(
                    def,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required".into(),
                ));
            }
        }
    } else {
        name
    };
    let label_only = def.group.is_empty() && def.plural == "namespaces";
    if let Some(problem) = name_problem(&name, label_only) {
        return Err(invalid(
            def,
            &name,
            "metadata.name",
            format!("Invalid value: {name:?}: {problem}"),
        ));
    }
    meta.insert("name".into(), Value::String(name));
    for server_owned in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "managedFields",
        "selfLink",
    ] {
        meta.remove(server_owned);
    }
    Ok(())
}

/// The object with metadata and status removed: what `generation` tracks.
///
/// Upstream, custom resources bump `generation` on any change outside `.metadata` and
/// `.status`; built-ins do it on spec changes. For the kinds served here the two rules
/// agree.
fn generation_relevant(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
        map.remove("apiVersion");
        map.remove("kind");
    }
    copy
}

/// Builds the candidate object of an update (PUT or patch result) from the stored
/// object `old` and the client's `new` body.
///
/// Checks preconditions (resourceVersion and uid in the body), keeps server-owned
/// metadata, applies status-subresource rules and computes `generation`. The result
/// carries `old`'s resourceVersion, so `candidate == old` means a no-op.
pub fn prepare_update(
    def: &ResourceDef,
    target: Target,
    old: &Value,
    mut new: Value,
) -> Result<Value, ApiError> {
    check_body(def, &new)?;
    strip_nulls(&mut new);
    let name = meta_str(old, "name").unwrap_or_default().to_owned();
    let conflict = |detail: String| ApiError::Conflict {
        resource: def.group_resource(),
        name: name.clone(),
        detail,
    };
    let old_rv = meta_str(old, "resourceVersion").unwrap_or_default();
    if let Some(rv) = meta_str(&new, "resourceVersion")
        && !rv.is_empty()
        && rv != old_rv
    {
        return Err(conflict(
            "the object has been modified; please apply your changes to the latest version and try again".into(),
        ));
    }
    let old_uid = meta_str(old, "uid").unwrap_or_default();
    if let Some(uid) = meta_str(&new, "uid")
        && !uid.is_empty()
        && uid != old_uid
    {
        return Err(conflict(format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {old_uid}"
        )));
    }
    if let Some(new_name) = meta_str(&new, "name")
        && !new_name.is_empty()
        && new_name != name
    {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    if def.namespaced
        && let Some(ns) = meta_str(&new, "namespace")
        && !ns.is_empty()
        && Some(ns) != meta_str(old, "namespace")
    {
        return Err(ApiError::BadRequest(format!(
            "the namespace of the provided object ({ns}) does not match the namespace sent on the request"
        )));
    }

    let mut candidate = match target {
        Target::Status => {
            // Only the status stanza of the body counts; everything else, metadata
            // included, stays as stored (upstream `ResetObjectMetaForStatus`).
            let mut c = old.clone();
            if let Some(map) = c.as_object_mut() {
                match new.get("status") {
                    Some(status) => map.insert("status".into(), status.clone()),
                    None => map.remove("status"),
                };
            }
            c
        }
        Target::Main => {
            let mut c = new;
            if def.status_subresource
                && let Some(map) = c.as_object_mut()
            {
                match old.get("status") {
                    Some(status) => map.insert("status".into(), status.clone()),
                    None => map.remove("status"),
                };
            }
            let old_meta = old.get("metadata").and_then(Value::as_object);
            with_meta(&mut c, |meta| {
                meta.remove("selfLink");
                meta.remove("generateName");
                // Field ownership is the server's record (server-side apply keeps it; see
                // `apply`): a client's update neither drops nor rewrites it.
                for preserved in [
                    "managedFields",
                    "name",
                    "namespace",
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "generateName",
                ] {
                    match old_meta.and_then(|m| m.get(preserved)) {
                        Some(v) => meta.insert(preserved.into(), v.clone()),
                        None => meta.remove(preserved),
                    };
                }
            });
            c
        }
    };
    if let Some(root) = candidate.as_object_mut() {
        root.insert("apiVersion".into(), Value::String(def.api_version()));
        root.insert("kind".into(), Value::String(def.kind.clone()));
    }
    with_meta(&mut candidate, |meta| {
        meta.insert("resourceVersion".into(), Value::String(old_rv.to_owned()))
    });

    if is_terminating(old) {
        let before = finalizers(old);
        if let Some(added) = finalizers(&candidate)
            .into_iter()
            .find(|f| !before.contains(f))
        {
            return Err(invalid(
                def,
                &name,
                "metadata.finalizers",
                format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [{added:?}]"
                ),
            ));
        }
    }

    if generation_relevant(&candidate) != generation_relevant(old) {
        let generation = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        with_meta(&mut candidate, |meta| {
            meta.insert("generation".into(), Value::from(generation + 1))
        });
    }
    Ok(candidate)
}

/// The `meta.k8s.io/v1` `PartialObjectMetadata` form of an object: what the real
/// server sends when the client's Accept header asks for metadata only.
pub fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn widgets() -> ResourceDef {
        ResourceDef::new("x.io", "v1", "widgets", "Widget", true, true)
    }

    fn stored() -> Value {
        json!({
            "apiVersion": "x.io/v1", "kind": "Widget",
            "metadata": {"name": "w", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 1},
            "spec": {"size": 1},
            "status": {"ready": false},
        })
    }

    #[test]
    fn create_fills_type_and_namespace_and_drops_status() {
        let obj = prepare_create(
            &widgets(),
            Some("ns"),
            json!({"metadata": {"name": "w", "uid": "forged"}, "spec": {}, "status": {"ready": true}}),
            || unreachable!(),
        )
        .expect("valid create");
        assert_eq!(obj["apiVersion"], "x.io/v1");
        assert_eq!(obj["kind"], "Widget");
        assert_eq!(obj["metadata"]["namespace"], "ns");
        assert!(obj["metadata"].get("uid").is_none());
        assert!(obj.get("status").is_none());
    }

    #[test]
    fn create_generates_names() {
        let obj = prepare_create(
            &widgets(),
            Some("ns"),
            json!({"metadata": {"generateName": "w-"}}),
            || "abcde".into(),
        )
        .expect("valid create");
        assert_eq!(obj["metadata"]["name"], "w-abcde");
    }

    #[test]
    fn create_rejects_missing_or_bad_names_and_set_resource_version() {
        let def = widgets();
        let err = prepare_create(&def, Some("ns"), json!({"metadata": {}}), String::new)
            .expect_err("no name");
        assert_eq!(err.code(), 422);
        let err = prepare_create(
            &def,
            Some("ns"),
            json!({"metadata": {"name": "Bad_Name"}}),
            String::new,
        )
        .expect_err("bad name");
        assert_eq!(err.code(), 422);
        let err = prepare_create(
            &def,
            Some("ns"),
            json!({"metadata": {"name": "w", "resourceVersion": "5"}}),
            String::new,
        )
        .expect_err("rv set");
        assert_eq!(err.code(), 500);
        let err = prepare_create(
            &def,
            Some("other"),
            json!({"metadata": {"name": "w", "namespace": "ns"}}),
            String::new,
        )
        .expect_err("namespace mismatch");
        assert_eq!(err.code(), 400);
        let err = prepare_create(
            &def,
            Some("ns"),
            json!({"kind": "Gadget", "metadata": {"name": "w"}}),
            String::new,
        )
        .expect_err("kind mismatch");
        assert_eq!(err.code(), 400);
    }

    #[test]
    fn main_update_ignores_status_and_bumps_generation_on_spec_change() {
        let mut body = stored();
        body["spec"]["size"] = json!(2);
        body["status"]["ready"] = json!(true);
        body["metadata"]["uid"] = json!(null);
        let c = prepare_update(&widgets(), Target::Main, &stored(), body).expect("valid update");
        assert_eq!(c["status"]["ready"], false);
        assert_eq!(c["spec"]["size"], 2);
        assert_eq!(c["metadata"]["generation"], 2);
        assert_eq!(c["metadata"]["uid"], "u1");
    }

    #[test]
    fn status_update_changes_only_status() {
        let mut body = stored();
        body["spec"]["size"] = json!(9);
        body["status"]["ready"] = json!(true);
        body["metadata"]["labels"] = json!({"a": "b"});
        let c = prepare_update(&widgets(), Target::Status, &stored(), body).expect("valid update");
        assert_eq!(c["status"]["ready"], true);
        assert_eq!(c["spec"]["size"], 1);
        assert!(c["metadata"].get("labels").is_none());
        assert_eq!(c["metadata"]["generation"], 1);
    }

    #[test]
    fn unchanged_update_equals_the_stored_object() {
        let mut body = stored();
        body["metadata"]["resourceVersion"] = json!(null);
        let c = prepare_update(&widgets(), Target::Main, &stored(), body).expect("valid update");
        assert_eq!(c, stored());
    }

    #[test]
    fn stale_resource_version_conflicts() {
        let mut body = stored();
        body["metadata"]["resourceVersion"] = json!("6");
        let err = prepare_update(&widgets(), Target::Main, &stored(), body).expect_err("stale");
        assert_eq!(err.code(), 409);
        assert_eq!(err.reason(), "Conflict");
    }

    #[test]
    fn terminating_objects_take_no_new_finalizers() {
        let mut old = stored();
        old["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:01Z");
        old["metadata"]["finalizers"] = json!(["a"]);
        let mut body = old.clone();
        body["metadata"]["finalizers"] = json!(["a", "b"]);
        let err = prepare_update(&widgets(), Target::Main, &old, body).expect_err("new finalizer");
        assert_eq!(err.code(), 422);
        let mut body = old.clone();
        body["metadata"]["finalizers"] = json!([]);
        let c = prepare_update(&widgets(), Target::Main, &old, body).expect("removing is fine");
        assert!(finalizers(&c).is_empty());
        assert!(is_terminating(&c));
    }
}
