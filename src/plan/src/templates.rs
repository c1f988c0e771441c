//! Pods that do not exist yet, made from pod templates: the pods a
//! ProvisioningRequest asks room for and the chunks of a CapacityBuffer.
//!
//! Templates come from `PodTemplate` objects (what Kueue writes for a
//! ProvisioningRequest, and what a buffer's `podTemplateRef` names) or from a
//! scalable object's `spec.template` (a buffer's `scalableRef`). A pod is made
//! as cluster-autoscaler's `GetPodFromTemplate` makes it: the template's
//! labels, annotations and spec, in the owner's namespace, under a stable name.

use dra_sim::ObjectRef;
use dra_sim::objects::ExtraObject;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

/// The kinds stand-in pods are made from, as `(API group, kind)`: the
/// requests and buffers and the objects whose templates they reference.
/// Callers ask the loader (or the API server) to keep them.
pub const STAND_IN_KINDS: &[(&str, &str)] = &[
    ("autoscaling.x-k8s.io", "ProvisioningRequest"),
    ("autoscaling.x-k8s.io", "CapacityBuffer"),
    ("", "PodTemplate"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("batch", "Job"),
];

/// The API group of an object (`""` for the core group).
#[must_use]
pub fn group_of(obj: &ExtraObject) -> &str {
    dra_sim::api_version::ApiGroupVersion::parse(&obj.api_version).group()
}

/// The object `obj` is, its namespace defaulted as the API server does.
#[must_use]
pub fn ref_of(obj: &ExtraObject) -> ObjectRef {
    let get = |k: &str| {
        obj.value
            .get("metadata")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let namespace = get("namespace");
    ObjectRef::new(
        if namespace.is_empty() {
            "default".to_string()
        } else {
            namespace
        },
        get("name"),
    )
}

/// The object's `metadata.creationTimestamp`, when set and valid.
#[must_use]
pub fn created_at(obj: &ExtraObject) -> Option<Time> {
    obj.value
        .pointer("/metadata/creationTimestamp")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// Why a pod template could not be found or read, in the words a
/// CapacityBuffer's or ProvisioningRequest's status shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `scalableRef` names a kind that has no pod template we read.
    #[error(
        "scalableRef kind {kind} (API group {api_group:?}) is not supported: expected apps Deployment, ReplicaSet or StatefulSet, or batch Job"
    )]
    UnsupportedKind {
        /// The kind.
        kind: String,
        /// Its API group.
        api_group: String,
    },
    /// The object is not in the snapshot.
    #[error("{kind} {object} not found")]
    NotFound {
        /// `PodTemplate` or the scalable kind.
        kind: String,
        /// The object.
        object: ObjectRef,
    },
    /// The object has no pod template at `field`.
    #[error("{kind} {object}: field {field} is missing")]
    NoTemplate {
        /// `PodTemplate` or the scalable kind.
        kind: String,
        /// The object.
        object: ObjectRef,
        /// `template` or `spec.template`.
        field: &'static str,
    },
    /// A replica count that is not a non-negative integer.
    #[error("{kind} {object}: field spec.{field}: expected a non-negative integer, got {got}")]
    BadCount {
        /// The scalable kind.
        kind: String,
        /// The object.
        object: ObjectRef,
        /// `replicas` or `parallelism`.
        field: &'static str,
        /// The value found, as JSON.
        got: String,
    },
    /// The template has no `spec`.
    #[error("field template.spec is missing")]
    NoPodSpec,
    /// The template is not a valid pod template.
    #[error("field template.{path}: {message}")]
    InvalidPod {
        /// The offending field's path inside the template.
        path: String,
        /// The decoder's message.
        message: String,
    },
}

/// The `template` of the PodTemplate `name` in `namespace`.
///
/// # Errors
/// A readable reason: the PodTemplate is not in the snapshot or has no
/// `template`.
pub fn pod_template<'a>(
    extra: &'a [ExtraObject],
    namespace: &str,
    name: &str,
) -> Result<&'a Value, TemplateError> {
    let shown = || ObjectRef::new(namespace, name);
    let object = extra
        .iter()
        .find(|o| {
            o.kind == "PodTemplate" && group_of(o).is_empty() && {
                let r = ref_of(o);
                r.namespace == namespace && r.name == name
            }
        })
        .ok_or_else(|| TemplateError::NotFound {
            kind: "PodTemplate".into(),
            object: shown(),
        })?;
    object
        .value
        .get("template")
        .ok_or_else(|| TemplateError::NoTemplate {
            kind: "PodTemplate".into(),
            object: shown(),
            field: "template",
        })
}

/// A scalable object's pod template and replica count (`spec.replicas`,
/// defaulted to 1 as the API server does; a Job's `spec.parallelism`).
///
/// # Errors
/// A readable reason: unsupported kind, object not found, no template.
pub fn scalable_template<'a>(
    extra: &'a [ExtraObject],
    namespace: &str,
    api_group: &str,
    kind: &str,
    name: &str,
) -> Result<(&'a Value, u64), TemplateError> {
    if !STAND_IN_KINDS[3..]
        .iter()
        .any(|&(g, k)| g == api_group && k == kind)
    {
        return Err(TemplateError::UnsupportedKind {
            kind: kind.to_string(),
            api_group: api_group.to_string(),
        });
    }
    let shown = || ObjectRef::new(namespace, name);
    let object = extra
        .iter()
        .find(|o| {
            o.kind == kind && group_of(o) == api_group && {
                let r = ref_of(o);
                r.namespace == namespace && r.name == name
            }
        })
        .ok_or_else(|| TemplateError::NotFound {
            kind: kind.to_string(),
            object: shown(),
        })?;
    let spec = object.value.get("spec");
    let template =
        spec.and_then(|s| s.get("template"))
            .ok_or_else(|| TemplateError::NoTemplate {
                kind: kind.to_string(),
                object: shown(),
                field: "spec.template",
            })?;
    let count_field = if kind == "Job" {
        "parallelism"
    } else {
        "replicas"
    };
    let replicas = match spec.and_then(|s| s.get(count_field)) {
        None | Some(Value::Null) => 1,
        Some(v) => v.as_u64().ok_or_else(|| TemplateError::BadCount {
            kind: kind.to_string(),
            object: shown(),
            field: count_field,
            got: v.to_string(),
        })?,
    };
    Ok((template, replicas))
}

/// A pending pod made from `template`, named `name`, with `annotations`
/// added, created at `created` (so it queues as its owner would), defaulted
/// as the API server defaults pods.
///
/// # Errors
/// A readable reason naming the template's field that is not a valid pod
/// template.
pub fn pod_from_template(
    template: &Value,
    name: &ObjectRef,
    annotations: &[(&str, &str)],
    created: Option<&Time>,
) -> Result<Pod, TemplateError> {
    let spec: PodTemplateSpec =
        serde_path_to_error::deserialize(template.clone()).map_err(|e| {
            TemplateError::InvalidPod {
                path: e.path().to_string(),
                message: e.inner().to_string(),
            }
        })?;
    let mut meta = spec.metadata.unwrap_or_default();
    meta.name = Some(name.name.clone());
    meta.namespace = Some(name.namespace.clone());
    meta.generate_name = None;
    // Unique and stable, as cluster-autoscaler's injected pods are, so claims
    // generated from templates are owned by this pod alone.
    meta.uid = Some(name.to_string());
    meta.creation_timestamp = created.cloned();
    let added = meta.annotations.get_or_insert_with(Default::default);
    for (key, value) in annotations {
        added.insert((*key).to_string(), (*value).to_string());
    }
    let mut pod = Pod {
        metadata: meta,
        spec: Some(spec.spec.ok_or(TemplateError::NoPodSpec)?),
        status: None,
    };
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = None;
    }
    dra_sim::defaults::pod(&mut pod).map_err(|e| TemplateError::InvalidPod {
        path: e.field.to_string(),
        message: e.message.to_string(),
    })?;
    Ok(pod)
}

/// Summed container requests of `resource` in `pod`, in nano-units; `None`
/// when no container requests it. An invalid quantity counts as not
/// requested (the loader has already rejected invalid pods from files).
#[must_use]
pub fn pod_request_nanos(pod: &Pod, resource: &str) -> Option<i128> {
    let mut total: Option<i128> = None;
    for container in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let Some(q) = container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(resource))
        else {
            continue;
        };
        if let Ok(n) = dra_sim::quantity::nano_value(&q.0) {
            total = Some(total.unwrap_or(0) + n);
        }
    }
    total
}
