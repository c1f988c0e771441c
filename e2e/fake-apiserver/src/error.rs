//! Errors: API errors rendered as Kubernetes `Status` objects, and start-up errors.
//!
//! Reasons and codes follow `k8s.io/apimachinery/pkg/api/errors`, because clients
//! branch on them: kube's `ErrorResponse.reason`, `Api::get_opt` (404), leader
//! election (409 Conflict), kube-runtime's watcher (410 Expired → relist).

use serde_json::{Value, json};

/// One field a validation failure names (a `StatusCause`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Field path, `spec.versions`.
    pub field: String,
    /// The error body, `Invalid value: "x": must be ...`.
    pub detail: String,
}

impl Cause {
    /// The cause reason upstream's `field.ErrorType` maps to.
    pub fn reason(&self) -> &'static str {
        let d = self.detail.as_str();
        if d.starts_with("Required value") {
            "FieldValueRequired"
        } else if d.starts_with("Unsupported value") {
            "FieldValueNotSupported"
        } else if d.starts_with("Too long") {
            "FieldValueTooLong"
        } else if d.starts_with("Too many") {
            "FieldValueTooMany"
        } else if d.starts_with("Duplicate value") {
            "FieldValueDuplicate"
        } else if d.starts_with("Forbidden") {
            "FieldValueForbidden"
        } else {
            "FieldValueInvalid"
        }
    }
}

fn join_causes(causes: &[Cause]) -> String {
    let parts: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.detail))
        .collect();
    match parts.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", parts.join(", ")),
    }
}

/// A failed API request, as the real server would report it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// 404: the object (or resource) does not exist.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// Group-qualified plural, e.g. `leases.coordination.k8s.io`.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 404 for a URL that names no served resource.
    #[error("the server could not find the requested resource")]
    UnknownResource,
    /// 409: create of a name that is taken.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// Group-qualified plural.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 409: a resourceVersion or uid precondition failed.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {detail}")]
    Conflict {
        /// Group-qualified plural.
        resource: String,
        /// Object name.
        name: String,
        /// Why, in the real server's words.
        detail: String,
    },
    /// 422: the object failed validation.
    #[error("{kind} \"{name}\" is invalid: {field}: {detail}")]
    Invalid {
        /// Kind of the object.
        kind: String,
        /// Object name (may be empty when the name itself is missing).
        name: String,
        /// JSON path of the offending field.
        field: String,
        /// What was wrong with it.
        detail: String,
    },
    /// 422: the object failed validation on several fields (or one, with its cause).
    #[error("{kind} \"{name}\" is invalid: {}", join_causes(.causes))]
    InvalidFields {
        /// Kind as upstream names it in the message (`NodeGroup.dra-autoscaler.io`).
        kind: String,
        /// Object name.
        name: String,
        /// Every failing field.
        causes: Vec<Cause>,
    },
    /// 400: a write with `fieldValidation=Strict` has fields the schema does not declare.
    #[error("{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}", .unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect::<Vec<_>>().join(", "))]
    StrictDecoding {
        /// Kind.
        kind: String,
        /// API version (`v1`, `v1alpha1`).
        version: String,
        /// Paths of the unknown fields.
        unknown: Vec<String>,
    },
    /// 504: a read asked for a resourceVersion the server has not reached within the wait
    /// (upstream `NewTooLargeResourceVersionError`).
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The resourceVersion asked for.
        requested: u64,
        /// The server's latest resourceVersion.
        current: u64,
        /// `details.retryAfterSeconds`; 0 leaves it out.
        retry_after: u64,
    },
    /// 400: the request could not be understood.
    #[error("{0}")]
    BadRequest(String),
    /// 405: the resource does not support this verb.
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// 415: unknown patch content type.
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// 410: a watch asked for history the server no longer has.
    #[error("{0}")]
    Expired(String),
    /// An error injected by a test through `fail_next`.
    #[error("injected fault: {reason} ({code})")]
    Injected {
        /// HTTP status code.
        code: u16,
        /// Status reason derived from the code.
        reason: String,
    },
    /// 500: a bug in the fake server.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// HTTP status code, also the Status object's `code`.
    pub fn code(&self) -> u16 {
        match self {
            Self::NotFound { .. } | Self::UnknownResource => 404,
            Self::AlreadyExists { .. } | Self::Conflict { .. } => 409,
            Self::Invalid { .. } | Self::InvalidFields { .. } => 422,
            Self::BadRequest(_) | Self::StrictDecoding { .. } => 400,
            Self::TooLargeResourceVersion { .. } => 504,
            Self::MethodNotAllowed => 405,
            Self::UnsupportedMediaType(_) => 415,
            Self::Expired(_) => 410,
            Self::Injected { code, .. } => *code,
            Self::Internal(_) => 500,
        }
    }

    /// Machine-readable reason (`metav1.StatusReason`).
    pub fn reason(&self) -> String {
        match self {
            Self::NotFound { .. } | Self::UnknownResource => "NotFound".into(),
            Self::AlreadyExists { .. } => "AlreadyExists".into(),
            Self::Conflict { .. } => "Conflict".into(),
            Self::Invalid { .. } | Self::InvalidFields { .. } => "Invalid".into(),
            Self::BadRequest(_) | Self::StrictDecoding { .. } => "BadRequest".into(),
            Self::TooLargeResourceVersion { .. } => "Timeout".into(),
            Self::MethodNotAllowed => "MethodNotAllowed".into(),
            Self::UnsupportedMediaType(_) => "UnsupportedMediaType".into(),
            Self::Expired(_) => "Expired".into(),
            Self::Injected { reason, .. } => reason.clone(),
            Self::Internal(_) => "InternalError".into(),
        }
    }

    /// An injected fault with the reason the real server uses for that code.
    pub fn injected(code: u16) -> Self {
        Self::Injected {
            code,
            reason: reason_for_code(code).to_owned(),
        }
    }

    /// The `Status` object sent as the response body (or inside a watch ERROR event).
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        let details = match self {
            Self::NotFound { resource, name }
            | Self::AlreadyExists { resource, name }
            | Self::Conflict { resource, name, .. } => {
                let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
                Some(json!({"name": name, "group": group, "kind": kind}))
            }
            Self::Invalid {
                kind,
                name,
                field,
                detail,
            } => Some(json!({
                "name": name,
                "kind": kind,
                "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": field}],
            })),
            Self::InvalidFields { kind, name, causes } => {
                let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
                Some(json!({
                    "name": name,
                    "group": group,
                    "kind": kind,
                    "causes": causes.iter().map(|c| json!({
                        "reason": c.reason(), "message": c.detail, "field": c.field,
                    })).collect::<Vec<_>>(),
                }))
            }
            Self::TooLargeResourceVersion { retry_after, .. } => {
                let mut details = json!({
                    "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                });
                if *retry_after > 0 {
                    details["retryAfterSeconds"] = json!(retry_after);
                }
                Some(details)
            }
            _ => None,
        };
        if let (Some(details), Some(obj)) = (details, status.as_object_mut()) {
            obj.insert("details".into(), details);
        }
        status
    }
}

/// The `metav1.StatusReason` the real server pairs with an HTTP code.
pub fn reason_for_code(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_renders_like_apimachinery() {
        let err = ApiError::NotFound {
            resource: "leases.coordination.k8s.io".into(),
            name: "leader".into(),
        };
        let status = err.to_status();
        assert_eq!(status["code"], 404);
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(
            status["message"],
            "leases.coordination.k8s.io \"leader\" not found"
        );
        assert_eq!(status["details"]["kind"], "leases");
        assert_eq!(status["details"]["group"], "coordination.k8s.io");
    }

    #[test]
    fn too_large_resource_version_is_upstreams_timeout_with_its_cause() {
        let status = ApiError::TooLargeResourceVersion {
            requested: 500,
            current: 12,
            retry_after: 1,
        }
        .to_status();
        assert_eq!(status["code"], 504);
        assert_eq!(status["reason"], "Timeout");
        assert_eq!(
            status["message"],
            "Timeout: Too large resource version: 500, current: 12"
        );
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
        assert_eq!(
            status["details"]["causes"][0]["message"],
            "Too large resource version"
        );
        assert_eq!(status["details"]["retryAfterSeconds"], 1);
    }

    #[test]
    fn strict_decoding_names_every_unknown_field() {
        let err = ApiError::StrictDecoding {
            kind: "Pod".into(),
            version: "v1".into(),
            unknown: vec!["spec.nodeNmae".into(), "metadata.lables".into()],
        };
        assert_eq!(err.code(), 400);
        assert_eq!(
            err.to_string(),
            "Pod in version \"v1\" cannot be handled as a Pod: strict decoding error: unknown field \"spec.nodeNmae\", unknown field \"metadata.lables\""
        );
    }

    #[test]
    fn injected_codes_get_upstream_reasons() {
        assert_eq!(ApiError::injected(500).reason(), "InternalError");
        assert_eq!(ApiError::injected(503).reason(), "ServiceUnavailable");
        assert_eq!(ApiError::injected(429).code(), 429);
    }
}
