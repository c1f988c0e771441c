//! PATCH bodies: merge (RFC 7386), JSON patch (RFC 6902), and the two kinds this
//! stand-in approximates with a merge: strategic merge and server-side apply.

use serde_json::Value;

use crate::error::ApiError;

/// The patch flavours of the `Content-Type` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`, applied as a merge patch: lists are
    /// replaced, not merged by key, and `$patch` directives are not understood.
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
            Self::Merge | Self::Strategic | Self::Apply => json_patch::merge(&mut doc, patch),
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
