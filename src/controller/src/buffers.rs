//! A CapacityBuffer's status as cluster-autoscaler's buffer controller and
//! pod-list processor write it (`autoscaling.x-k8s.io/v1beta1`):
//!
//! - read: `podTemplateRef` (the PodTemplate the chunks are made from; none
//!   for a `scalableRef`, whose template is read in place), `replicas` (the
//!   chunks kept), `podTemplateGeneration`, `provisioningStrategy` (defaulted
//!   to `buffer.x-k8s.io/active-capacity`) and `ReadyForProvisioning=True`
//!   (`AttributesSetSuccessfully`, "ready"); a buffer that cannot be read gets
//!   `ReadyForProvisioning=False` (reason `error`, the message saying why);
//! - planned: `Provisioning=True` (`FakePodsInjected`) once its chunks are
//!   planned, `Provisioning=False` (`BufferIsEmpty`) with no chunk, and
//!   (`NotReadyForProvisioning`) when it is not ready. The message of
//!   `Provisioning=True` says where the chunks are (upstream leaves it empty).
//!
//! Conditions follow `meta.SetStatusCondition` ([`crate::conditions::set`]).
//! Buffers of another provisioning strategy are not ours: never written.

use dra_plan::buffers::{ACTIVE_CAPACITY_STRATEGY, BufferOutcome, CapacityBufferReport};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::conditions::set;

/// Condition: the buffer was read into chunks.
pub const READY_FOR_PROVISIONING: &str = "ReadyForProvisioning";
/// Condition: its chunks are planned.
pub const PROVISIONING: &str = "Provisioning";

/// The status to write for the buffer `report` describes, given its
/// `current` status and `generation` (kind, name → `metadata.generation` of
/// the object its template comes from); `None` when nothing would change or
/// the buffer is not ours.
#[must_use]
pub fn next_status(
    current: Option<&Value>,
    report: &CapacityBufferReport,
    generation: impl Fn(&str, &str) -> Option<i64>,
    now: Timestamp,
) -> Option<Value> {
    if report.outcome == BufferOutcome::NotHandled {
        return None;
    }
    let mut conditions: Vec<Condition> = current
        .and_then(|s| s.get("conditions"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let mut status = serde_json::Map::new();
    status.insert(
        "provisioningStrategy".into(),
        ACTIVE_CAPACITY_STRATEGY.into(),
    );
    if report.outcome == BufferOutcome::Invalid {
        let why = if report.reasons.is_empty() {
            "Buffer not ready for provisioning".to_string()
        } else {
            report.reasons.join("; ")
        };
        set(
            &mut conditions,
            READY_FOR_PROVISIONING,
            false,
            "error",
            &why,
            now,
        );
        set(
            &mut conditions,
            PROVISIONING,
            false,
            "NotReadyForProvisioning",
            "CapacityBuffer is not ready for provisioning",
            now,
        );
        status.insert("podTemplateRef".into(), Value::Null);
        status.insert("replicas".into(), Value::Null);
    } else {
        let template = report
            .pod_template
            .as_deref()
            .and_then(|t| t.split_once(' '));
        match template {
            Some(("PodTemplate", name)) => {
                status.insert("podTemplateRef".into(), json!({ "name": name }));
            }
            _ => {
                status.insert("podTemplateRef".into(), Value::Null);
            }
        }
        if let Some(g) = template.and_then(|(kind, name)| generation(kind, name)) {
            status.insert("podTemplateGeneration".into(), g.into());
        }
        status.insert("replicas".into(), report.replicas.into());
        set(
            &mut conditions,
            READY_FOR_PROVISIONING,
            true,
            "AttributesSetSuccessfully",
            "ready",
            now,
        );
        if report.replicas == 0 {
            set(
                &mut conditions,
                PROVISIONING,
                false,
                "BufferIsEmpty",
                "CapacityBuffer has zero replicas",
                now,
            );
        } else {
            let mut message = format!(
                "{} on existing nodes, {} on new nodes, {} fit nowhere",
                report.existing, report.new_nodes, report.waiting
            );
            if let Some(first) = report.reasons.first() {
                message.push_str(": ");
                message.push_str(first);
            }
            set(
                &mut conditions,
                PROVISIONING,
                true,
                "FakePodsInjected",
                &message,
                now,
            );
        }
    }
    status.insert("conditions".into(), serde_json::to_value(&conditions).ok()?);
    let unchanged = status.iter().all(|(k, v)| {
        let old = current.and_then(|c| c.get(k)).unwrap_or(&Value::Null);
        if k == "conditions" {
            serde_json::from_value::<Vec<Condition>>(old.clone()).is_ok_and(|o| o == conditions)
        } else {
            old == v
        }
    });
    (!unchanged).then_some(Value::Object(status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_sim::ObjectRef;

    fn report(outcome: BufferOutcome, replicas: usize, template: &str) -> CapacityBufferReport {
        CapacityBufferReport {
            capacity_buffer: ObjectRef::new("ml", "headroom"),
            pod_template: Some(template.into()),
            replicas,
            outcome,
            existing: 1,
            new_nodes: replicas.saturating_sub(1),
            waiting: 0,
            pods: Vec::new(),
            reasons: Vec::new(),
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("time")
    }

    fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
        status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == type_))
            .expect("condition")
    }

    #[test]
    fn a_pod_template_buffer_is_ready_and_provisioning_as_upstream_writes_it() {
        let r = report(BufferOutcome::Provisioning, 3, "PodTemplate mig-slice");
        let status = next_status(
            None,
            &r,
            |k, n| (k == "PodTemplate" && n == "mig-slice").then_some(4),
            at("2026-12-01T10:00:00Z"),
        )
        .expect("written");
        assert_eq!(status["podTemplateRef"], json!({"name": "mig-slice"}));
        assert_eq!(status["replicas"], 3);
        assert_eq!(status["podTemplateGeneration"], 4);
        assert_eq!(
            status["provisioningStrategy"],
            "buffer.x-k8s.io/active-capacity"
        );
        let ready = condition(&status, "ReadyForProvisioning");
        assert_eq!(
            (&ready["status"], &ready["reason"], &ready["message"]),
            (
                &json!("True"),
                &json!("AttributesSetSuccessfully"),
                &json!("ready")
            )
        );
        let provisioning = condition(&status, "Provisioning");
        assert_eq!(
            (&provisioning["status"], &provisioning["reason"]),
            (&json!("True"), &json!("FakePodsInjected"))
        );
        // Written once: the same plan later writes nothing.
        assert_eq!(
            next_status(
                Some(&status),
                &r,
                |_, _| Some(4),
                at("2026-12-01T10:01:00Z")
            ),
            None
        );
    }

    #[test]
    fn empty_invalid_and_foreign_buffers() {
        let empty = next_status(
            None,
            &report(BufferOutcome::Ready, 0, "Deployment web"),
            |_, _| None,
            at("2026-12-01T10:00:00Z"),
        )
        .expect("written");
        assert_eq!(
            empty["podTemplateRef"],
            Value::Null,
            "a scalableRef names no PodTemplate"
        );
        let provisioning = condition(&empty, "Provisioning");
        assert_eq!(
            (&provisioning["status"], &provisioning["reason"]),
            (&json!("False"), &json!("BufferIsEmpty"))
        );

        let mut bad = report(BufferOutcome::Invalid, 0, "PodTemplate gone");
        bad.reasons = vec!["PodTemplate ml/gone not found".into()];
        let invalid =
            next_status(None, &bad, |_, _| None, at("2026-12-01T10:00:00Z")).expect("written");
        let ready = condition(&invalid, "ReadyForProvisioning");
        assert_eq!(
            (&ready["status"], &ready["reason"], &ready["message"]),
            (
                &json!("False"),
                &json!("error"),
                &json!("PodTemplate ml/gone not found")
            )
        );
        assert_eq!(
            condition(&invalid, "Provisioning")["reason"],
            "NotReadyForProvisioning"
        );

        assert_eq!(
            next_status(
                None,
                &report(BufferOutcome::NotHandled, 2, "PodTemplate x"),
                |_, _| None,
                at("2026-12-01T10:00:00Z")
            ),
            None
        );
    }
}
