//! PATCH bodies: merge (RFC 7386), JSON patch (RFC 6902), strategic merge (approximated) and
//! server-side apply (approximated with a merge).
//!
//! Strategic merge is what `kubectl apply` sends for built-in kinds. Lists of objects are
//! merged element by element on their merge key, which the patch names in its
//! `$setElementOrder/<field>` directive (as kubectl writes it), falling back to `name`, the
//! merge key of most lists; `{"$patch": "delete", <key>: ...}` elements remove one, and the
//! directives never end up in the object. Without schema merge keys, lists no element of which
//! has the key are replaced, as in a merge patch.

use serde_json::Value;

use crate::error::ApiError;

/// The patch flavours of the `Content-Type` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`: a merge whose lists of objects merge by key
    /// (see the module documentation).
    Strategic,
    /// `application/json-patch+json`.
    Json,
    /// `application/apply-patch+yaml` (server-side apply), applied as a merge patch
    /// that creates the object when it is missing. No field ownership, no conflicts.
    Apply,
}

const ACCEPTED: &str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml";

impl PatchType {
    /// Parses a `Content-Type` header value (parameters such as `charset` ignored).
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match media.as_str() {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/json-patch+json" => Ok(Self::Json),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Ok(Self::Apply),
            _ => Err(ApiError::UnsupportedMediaType(ACCEPTED.into())),
        }
    }

    /// Decodes a patch body. Apply bodies may be YAML; the others must be JSON.
    pub fn parse_body(self, body: &[u8]) -> Result<Value, ApiError> {
        let parsed = match serde_json::from_slice::<Value>(body) {
            Ok(v) => Ok(v),
            Err(json_err) if self == Self::Apply => std::str::from_utf8(body)
                .map_err(|e| e.to_string())
                .and_then(|text| serde_saphyr::from_str::<Value>(text).map_err(|e| e.to_string()))
                .map_err(|yaml_err| format!("{json_err}; as YAML: {yaml_err}")),
            Err(json_err) => Err(json_err.to_string()),
        };
        let value = parsed
            .map_err(|e| ApiError::BadRequest(format!("unable to decode patch body: {e}")))?;
        let shape_ok = match self {
            Self::Json => value.is_array(),
            _ => value.is_object(),
        };
        if !shape_ok {
            return Err(ApiError::BadRequest(format!(
                "unable to decode patch body: a {} patch must be a JSON {}",
                self.name(),
                if self == Self::Json {
                    "array of operations"
                } else {
                    "object"
                }
            )));
        }
        Ok(value)
    }

    fn name(self) -> &'static str {
        match self {
            Self::Merge => "merge",
            Self::Strategic => "strategic merge",
            Self::Json => "JSON",
            Self::Apply => "apply",
        }
    }

    /// Applies a decoded patch to `target` and returns the patched document.
    pub fn apply(self, target: &Value, patch: &Value) -> Result<Value, ApiError> {
        let mut doc = target.clone();
        match self {
            Self::Merge | Self::Apply => json_patch::merge(&mut doc, patch),
            Self::Strategic => strategic_merge(&mut doc, patch),
            Self::Json => {
                let ops: json_patch::Patch =
                    serde_json::from_value(patch.clone()).map_err(|e| {
                        ApiError::BadRequest(format!("unable to decode JSON patch operations: {e}"))
                    })?;
                // Upstream answers a patch that cannot be applied (failed `test`,
                // missing path) with 422.
                json_patch::patch(&mut doc, &ops).map_err(|e| ApiError::Invalid {
                    kind: String::new(),
                    name: String::new(),
                    field: "patch".into(),
                    detail: e.to_string(),
                })?;
            }
        }
        Ok(doc)
    }
}

const SET_ORDER: &str = "$setElementOrder/";

/// The merge key of a list: the one key of the `$setElementOrder` entries, else `name` when
/// every element of both lists has one.
fn merge_key(order: Option<&Vec<Value>>, old: &[Value], new: &[Value]) -> Option<String> {
    if let Some(first) = order.and_then(|o| o.first()).and_then(Value::as_object)
        && first.len() == 1
    {
        return first.keys().next().cloned();
    }
    let keyed = |items: &[Value]| items.iter().all(|i| i.get("name").is_some());
    (!new.is_empty() && keyed(old) && keyed(new)).then(|| "name".to_owned())
}

fn merge_lists(old: &[Value], new: &[Value], order: Option<&Vec<Value>>) -> Value {
    let Some(key) = merge_key(order, old, new) else {
        return Value::Array(new.to_vec());
    };
    let mut merged: Vec<Value> = old.to_vec();
    for element in new {
        let id = element.get(&key);
        let position = merged.iter().position(|m| m.get(&key) == id);
        if element.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(i) = position {
                merged.remove(i);
            }
            continue;
        }
        match position {
            Some(i) => strategic_merge(&mut merged[i], element),
            None => {
                let mut fresh = Value::Null;
                strategic_merge(&mut fresh, element);
                merged.push(fresh);
            }
        }
    }
    if let Some(order) = order {
        let rank = |item: &Value| {
            order
                .iter()
                .position(|o| o.get(&key) == item.get(&key))
                .unwrap_or(usize::MAX)
        };
        merged.sort_by_key(rank);
    }
    Value::Array(merged)
}

/// Applies a strategic merge patch (see the module documentation) to `doc`.
fn strategic_merge(doc: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *doc = patch.clone();
        return;
    };
    if !doc.is_object() {
        *doc = Value::Object(serde_json::Map::new());
    }
    let Value::Object(target) = doc else {
        return;
    };
    for (key, value) in patch_map {
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Array(new) => {
                let order = patch_map
                    .get(&format!("{SET_ORDER}{key}"))
                    .and_then(Value::as_array);
                let old = target
                    .get(key)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let objects = new.iter().all(Value::is_object);
                let merged = if objects {
                    merge_lists(&old, new, order)
                } else {
                    Value::Array(new.clone())
                };
                target.insert(key.clone(), merged);
            }
            Value::Object(_) => {
                let entry = target.entry(key.clone()).or_insert(Value::Null);
                strategic_merge(entry, value);
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
    // A list the patch only reorders.
    for (key, order) in patch_map {
        let Some(field) = key.strip_prefix(SET_ORDER) else {
            continue;
        };
        if patch_map.contains_key(field) {
            continue;
        }
        if let (Some(Value::Array(items)), Some(order)) = (target.get(field), order.as_array()) {
            let merged = merge_lists(items, &[], Some(order));
            target.insert(field.to_owned(), merged);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn strategic_merge_merges_keyed_lists_and_drops_directives() {
        // What kubectl apply sends after a container field was added.
        let target = json!({"spec": {"containers": [
            {"name": "a", "image": "x", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "image": "y"}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "a", "imagePullPolicy": "Always"}]}});
        let out = PatchType::Strategic.apply(&target, &patch).expect("patch");
        assert_eq!(
            out,
            json!({"spec": {"containers": [
                {"name": "a", "image": "x", "imagePullPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "b", "image": "y"}]}})
        );
        let delete = json!({"spec": {"containers": [{"$patch": "delete", "name": "b"}]}});
        let out = PatchType::Strategic.apply(&out, &delete).expect("patch");
        assert_eq!(out["spec"]["containers"].as_array().map(Vec::len), Some(1));
        let scalars = json!({"spec": {"args": ["--v=2"]}});
        let out = PatchType::Strategic
            .apply(&json!({"spec": {"args": ["--v=1", "x"]}}), &scalars)
            .expect("patch");
        assert_eq!(
            out,
            json!({"spec": {"args": ["--v=2"]}}),
            "primitive lists are replaced"
        );
    }

    #[test]
    fn content_types_map_to_patch_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Ok(PatchType::Merge)
        );
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml"),
            Ok(PatchType::Apply)
        );
        assert_eq!(
            PatchType::from_content_type("application/json").map_err(|e| e.code()),
            Err(415)
        );
    }

    #[test]
    fn merge_patch_follows_rfc7386() {
        let target = json!({"a": {"b": 1, "c": 2}, "l": [1, 2]});
        let patch = json!({"a": {"b": null, "d": 3}, "l": [3]});
        let out = PatchType::Merge.apply(&target, &patch).expect("merge");
        assert_eq!(out, json!({"a": {"c": 2, "d": 3}, "l": [3]}));
    }

    #[test]
    fn json_patch_test_failure_is_unprocessable() {
        let target = json!({"metadata": {"resourceVersion": "3"}});
        let patch = json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": "2"},
            {"op": "add", "path": "/x", "value": 1}
        ]);
        let err = PatchType::Json
            .apply(&target, &patch)
            .expect_err("test fails");
        assert_eq!(err.code(), 422);
        let ok = json!([{"op": "add", "path": "/x", "value": 1}]);
        assert_eq!(
            PatchType::Json.apply(&target, &ok).expect("add")["x"],
            json!(1)
        );
    }

    #[test]
    fn apply_bodies_may_be_yaml() {
        let body = b"apiVersion: v1\nkind: ConfigMap\ndata:\n  k: v\n";
        let v = PatchType::Apply.parse_body(body).expect("yaml");
        assert_eq!(v["data"]["k"], "v");
        assert!(PatchType::Merge.parse_body(body).is_err());
        assert!(PatchType::Json.parse_body(b"{}").is_err());
    }
}
