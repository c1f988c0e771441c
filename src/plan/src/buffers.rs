//! CapacityBuffers (`autoscaling.x-k8s.io/v1beta1`, cluster-autoscaler's
//! API): spare capacity kept free, as stand-in pods the planner places like
//! pending ones.
//!
//! A buffer is read as upstream's buffer controller translates it:
//! - the chunk's shape is the PodTemplate `spec.podTemplateRef` names, or the
//!   `spec.template` of the object `spec.scalableRef` names (Deployment,
//!   ReplicaSet, StatefulSet, Job); ResourceClaimTemplates in it are honoured,
//!   so a buffer can hold GPU partitions;
//! - chunks = the larger of `spec.replicas` and `spec.percentage` of the
//!   scalable object's replicas (rounded up), capped by `spec.limits` (how
//!   many chunks' requests fit); with neither replicas nor percentage, as
//!   many chunks as fit in the limits;
//! - only the default strategy `buffer.x-k8s.io/active-capacity` is served.
//!
//! Each chunk is a pod of its own (upstream injects independent fake pods),
//! named `<buffer>-chunk-<n>`.

use dra_sim::ObjectRef;
use dra_sim::objects::ExtraObject;
use dra_sim::quantity::QuantityError;
use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::provreq::API_GROUP;
use crate::templates::{
    TemplateError, created_at, group_of, pod_from_template, pod_request_nanos, pod_template,
    ref_of, scalable_template,
};

/// Kind of a CapacityBuffer.
pub const KIND: &str = "CapacityBuffer";
/// The strategy served (upstream's default).
pub const ACTIVE_CAPACITY_STRATEGY: &str = "buffer.x-k8s.io/active-capacity";
/// Annotation on a chunk pod naming its buffer.
pub const BUFFER_ANNOTATION: &str = "autoscaling.x-k8s.io/capacity-buffer";

/// One buffer as read.
#[derive(Debug, Clone)]
pub(crate) struct Buffer {
    pub(crate) name: ObjectRef,
    /// What the chunks are made from: `PodTemplate <name>` or `<Kind> <name>`.
    pub(crate) source: Option<String>,
    /// Why no chunk could be made (or the strategy is not served).
    pub(crate) error: Option<String>,
    pub(crate) pods: Vec<Pod>,
}

/// Where a buffer's chunks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferOutcome {
    /// Every chunk fits on existing capacity.
    Ready,
    /// Every chunk fits, some on the planned new nodes.
    Provisioning,
    /// Some chunks fit nowhere.
    Partial,
    /// No chunk could be made: the reasons say why.
    Invalid,
    /// A provisioning strategy this autoscaler does not serve.
    NotHandled,
}

/// The plan for one CapacityBuffer (`capacityBuffers` in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferReport {
    /// The buffer, `namespace/name`.
    pub capacity_buffer: ObjectRef,
    /// What its chunks are made from (`PodTemplate gpu-slice`, `Deployment web`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<String>,
    /// Chunks wanted.
    pub replicas: usize,
    /// Where they are.
    pub outcome: BufferOutcome,
    /// Chunks on existing (or upcoming) nodes.
    pub existing: usize,
    /// Chunks on nodes this plan adds.
    pub new_nodes: usize,
    /// Chunks that fit nowhere.
    pub waiting: usize,
    /// The chunk pods, `namespace/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<ObjectRef>,
    /// Why chunks wait, or why the buffer was not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// Why a CapacityBuffer was not read; shown after `CapacityBuffer <name>: `
/// in the buffer's `error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BufferError {
    /// Both template sources are set.
    #[error("spec: podTemplateRef and scalableRef are both set; exactly one is allowed")]
    BothRefs,
    /// Neither template source is set.
    #[error("spec: one of podTemplateRef and scalableRef is required")]
    NoRef,
    /// The PodTemplate named by `podTemplateRef`.
    #[error(transparent)]
    PodTemplate(Box<TemplateError>),
    /// The object named by `scalableRef`.
    #[error("spec.scalableRef: {0}")]
    ScalableRef(Box<TemplateError>),
    /// The template does not make a pod.
    #[error("{origin}: {error}")]
    Pod {
        /// Where the template came from (`PodTemplate t`, `Deployment d`).
        origin: String,
        /// Why.
        error: Box<TemplateError>,
    },
    /// `spec.replicas` or `spec.percentage` that is not a count.
    #[error("field spec.{field}: expected a non-negative integer, got {got}")]
    NotACount {
        /// The field.
        field: &'static str,
        /// The value found, as JSON.
        got: String,
    },
    /// `spec.limits` that is not a map.
    #[error("field spec.limits: expected a map, got {0}")]
    LimitsNotAMap(String),
    /// A limit that is neither a string nor a number.
    #[error("field spec.limits.{resource}: {got} is not a quantity")]
    LimitNotAQuantity {
        /// The resource.
        resource: String,
        /// The value found, as JSON.
        got: String,
    },
    /// A limit that does not parse as a quantity.
    #[error("field spec.limits.{resource}: {error}")]
    LimitQuantity {
        /// The resource.
        resource: String,
        /// The parser's error.
        error: QuantityError,
    },
    /// Nothing gives the buffer a size.
    #[error("spec: replicas, percentage (with scalableRef) or limits must give a size")]
    NoSize,
}

fn int_field(spec: Option<&Value>, field: &'static str) -> Result<Option<u64>, BufferError> {
    match spec.and_then(|s| s.get(field)) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| BufferError::NotACount {
            field,
            got: v.to_string(),
        }),
    }
}

/// How many chunks of `pod` fit within `limits` (resource → quantity):
/// the smallest of limit ÷ request over the resources the chunk requests.
fn chunks_within(limits: &serde_json::Map<String, Value>, pod: &Pod) -> Result<u64, BufferError> {
    let mut fit = u64::MAX;
    for (resource, limit) in limits {
        let text = match limit {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            other => {
                return Err(BufferError::LimitNotAQuantity {
                    resource: resource.clone(),
                    got: other.to_string(),
                });
            }
        };
        let limit =
            dra_sim::quantity::nano_value(&text).map_err(|error| BufferError::LimitQuantity {
                resource: resource.clone(),
                error,
            })?;
        if let Some(request) = pod_request_nanos(pod, resource).filter(|&r| r > 0) {
            let n = (limit.max(0) / request).min(i128::from(u32::MAX));
            fit = fit.min(u64::try_from(n).unwrap_or(0));
        }
    }
    Ok(fit)
}

/// Reads one buffer into its chunk pods.
fn read_buffer(obj: &ExtraObject, extra: &[ExtraObject]) -> Buffer {
    let name = ref_of(obj);
    let mut buffer = Buffer {
        name: name.clone(),
        source: None,
        error: None,
        pods: Vec::new(),
    };
    let spec = obj.value.get("spec");
    let strategy = spec
        .and_then(|s| s.get("provisioningStrategy"))
        .and_then(Value::as_str)
        .unwrap_or(ACTIVE_CAPACITY_STRATEGY);
    if strategy != ACTIVE_CAPACITY_STRATEGY {
        buffer.error = Some(format!(
            "provisioning strategy {strategy:?} is not served: expected {ACTIVE_CAPACITY_STRATEGY}"
        ));
        return buffer;
    }
    let result = (|| -> Result<(String, Vec<Pod>), BufferError> {
        let template_ref = spec
            .and_then(|s| s.pointer("/podTemplateRef/name"))
            .and_then(Value::as_str);
        let scalable = spec.and_then(|s| s.get("scalableRef"));
        let (template, source, scalable_replicas) = match (template_ref, scalable) {
            (Some(_), Some(_)) => {
                return Err(BufferError::BothRefs);
            }
            (Some(t), None) => (
                pod_template(extra, &name.namespace, t)
                    .map_err(|e| BufferError::PodTemplate(Box::new(e)))?,
                format!("PodTemplate {t}"),
                None,
            ),
            (None, Some(r)) => {
                let get = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default();
                let (template, replicas) = scalable_template(
                    extra,
                    &name.namespace,
                    get("apiGroup"),
                    get("kind"),
                    get("name"),
                )
                .map_err(|e| BufferError::ScalableRef(Box::new(e)))?;
                (
                    template,
                    format!("{} {}", get("kind"), get("name")),
                    Some(replicas),
                )
            }
            (None, None) => {
                return Err(BufferError::NoRef);
            }
        };
        let replicas = int_field(spec, "replicas")?;
        let percentage = int_field(spec, "percentage")?;
        let from_percentage = match (percentage, scalable_replicas) {
            (Some(p), Some(r)) => Some((p * r).div_ceil(100)),
            _ => None,
        };
        let wanted = replicas.into_iter().chain(from_percentage).max();
        let created = created_at(obj);
        let make = |j: u64| {
            let pod_name =
                ObjectRef::new(name.namespace.clone(), format!("{}-chunk-{j}", name.name));
            pod_from_template(
                template,
                &pod_name,
                &[(BUFFER_ANNOTATION, &name.name)],
                created.as_ref(),
            )
            .map_err(|error| BufferError::Pod {
                origin: source.clone(),
                error: Box::new(error),
            })
        };
        let probe = make(0)?;
        let cap = match spec.and_then(|s| s.get("limits")) {
            None | Some(Value::Null) => None,
            Some(Value::Object(limits)) => Some(chunks_within(limits, &probe)?),
            Some(other) => return Err(BufferError::LimitsNotAMap(other.to_string())),
        };
        let count = match (wanted, cap) {
            (Some(w), Some(c)) => w.min(c),
            (Some(w), None) => w,
            (None, Some(c)) if c != u64::MAX => c,
            (None, _) => {
                return Err(BufferError::NoSize);
            }
        };
        let pods = (0..count).map(make).collect::<Result<Vec<_>, _>>()?;
        Ok((source, pods))
    })();
    match result {
        Ok((source, pods)) => {
            buffer.source = Some(source);
            buffer.pods = pods;
        }
        Err(e) => buffer.error = Some(format!("CapacityBuffer {name}: {e}")),
    }
    buffer
}

/// Every CapacityBuffer among `extra`, with its chunk pods.
pub(crate) fn read_buffers(extra: &[ExtraObject]) -> Vec<Buffer> {
    extra
        .iter()
        .filter(|o| o.kind == KIND && group_of(o) == API_GROUP)
        .map(|o| read_buffer(o, extra))
        .collect()
}

/// The report entry of `buffer`; `placed(pod)` says where a chunk went:
/// `Some(false)` existing capacity, `Some(true)` a new node, `None` nowhere
/// (with the pod's reasons).
pub(crate) fn report(
    buffer: &Buffer,
    placed: impl Fn(&ObjectRef) -> (Option<bool>, Vec<String>),
) -> CapacityBufferReport {
    let pods: Vec<ObjectRef> = buffer
        .pods
        .iter()
        .map(|p| ObjectRef::namespaced(&p.metadata))
        .collect();
    let mut out = CapacityBufferReport {
        capacity_buffer: buffer.name.clone(),
        pod_template: buffer.source.clone(),
        replicas: pods.len(),
        outcome: BufferOutcome::Ready,
        existing: 0,
        new_nodes: 0,
        waiting: 0,
        pods: Vec::new(),
        reasons: Vec::new(),
    };
    if let Some(e) = &buffer.error {
        out.outcome = if e.starts_with("provisioning strategy") {
            BufferOutcome::NotHandled
        } else {
            BufferOutcome::Invalid
        };
        out.reasons.push(e.clone());
        return out;
    }
    for pod in &pods {
        match placed(pod) {
            (Some(false), _) => out.existing += 1,
            (Some(true), _) => out.new_nodes += 1,
            (None, reasons) => {
                out.waiting += 1;
                for r in reasons {
                    if !out.reasons.contains(&r) {
                        out.reasons.push(r);
                    }
                }
            }
        }
    }
    out.outcome = if out.waiting > 0 {
        BufferOutcome::Partial
    } else if out.new_nodes > 0 {
        BufferOutcome::Provisioning
    } else {
        BufferOutcome::Ready
    };
    out.pods = pods;
    out
}
