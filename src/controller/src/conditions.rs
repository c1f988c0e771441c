//! NodeGroup status conditions, set as upstream's `meta.SetStatusCondition`
//! does: `lastTransitionTime` moves only when the status changes.
//!
//! The Backoff condition keeps its own rules (see [`crate::backoff`]).

use dra_api::NodeGroupSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

// `ScalingActive` is in the sense of the HorizontalPodAutoscaler's ("able to scale if
// necessary: correctly configured and not disabled"); whether scaling is held back for a
// while is the `Backoff` condition (the HPA's `AbleToScale`). Types and reasons live in the
// catalog, which the reference page is generated from.
use crate::catalog::{
    ABOVE_MIN_SIZE, ACTIVE, AT_MIN_SIZE_REASON, BELOW_MIN_SIZE, SCALING_DISABLED,
};
pub use crate::catalog::{AT_MIN_SIZE, SCALING_ACTIVE, SCALING_INACTIVE_INVALID};

/// Sets condition `type_` to `value` with `reason` and `message`. Returns
/// whether anything changed.
pub fn set(
    conditions: &mut Vec<Condition>,
    type_: &str,
    value: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let status = if value { "True" } else { "False" };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status && c.reason == reason && c.message == message => false,
        Some(c) => {
            if c.status != status {
                c.status = status.into();
                c.last_transition_time = Time(now);
            }
            reason.clone_into(&mut c.reason);
            message.clone_into(&mut c.message);
            true
        }
        None => {
            conditions.push(Condition {
                type_: type_.into(),
                status: status.into(),
                reason: reason.into(),
                message: message.into(),
                last_transition_time: Time(now),
                observed_generation: None,
            });
            true
        }
    }
}

/// `AtMinSize` for a group of `size` nodes (registered and upcoming). Below
/// `minSize` it explains why nothing is added: like cluster-autoscaler
/// without `--enforce-node-group-min-size`, nodes are added only for pending
/// pods; `minSize` bounds scale-down.
#[must_use]
pub fn at_min_size(spec: &NodeGroupSpec, size: i32) -> (bool, &'static str, String) {
    let min = spec.min_size;
    match size.cmp(&min) {
        std::cmp::Ordering::Less => (
            false,
            BELOW_MIN_SIZE,
            format!(
                "{size} node(s), below spec.minSize {min}: nodes are added only for pending pods, and scale-down stops at minSize"
            ),
        ),
        std::cmp::Ordering::Equal => (
            true,
            AT_MIN_SIZE_REASON,
            format!("{size} node(s), spec.minSize {min}: scale-down removes no more"),
        ),
        std::cmp::Ordering::Greater => (
            false,
            ABOVE_MIN_SIZE,
            format!("{size} node(s), above spec.minSize {min}"),
        ),
    }
}

/// `ScalingActive` for a group the loop plans with: `True` unless `spec.maxSize` is 0 (the
/// HPA's `ScalingDisabled`: the group is never scaled up). A group left out as invalid gets
/// `False` / [`SCALING_INACTIVE_INVALID`] instead.
#[must_use]
pub fn scaling_active(spec: &NodeGroupSpec) -> (bool, &'static str, String) {
    if spec.max_size <= 0 {
        return (
            false,
            SCALING_DISABLED,
            "spec.maxSize is 0: no node is ever added to this group".into(),
        );
    }
    (
        true,
        ACTIVE,
        format!(
            "planned with in every loop: nodes are added for pending pods up to spec.maxSize {}",
            spec.max_size
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_on_a_status_change() {
        let t0: Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let t1: Timestamp = "2026-12-01T11:00:00Z".parse().unwrap();
        let mut conditions = Vec::new();
        assert!(set(&mut conditions, "Valid", false, "InvalidSpec", "x", t0));
        assert!(!set(
            &mut conditions,
            "Valid",
            false,
            "InvalidSpec",
            "x",
            t1
        ));
        assert!(set(&mut conditions, "Valid", false, "InvalidSpec", "y", t1));
        assert_eq!(conditions[0].last_transition_time.0, t0);
        assert!(set(&mut conditions, "Valid", true, "Valid", "ok", t1));
        assert_eq!(conditions[0].last_transition_time.0, t1);
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn below_min_size_is_explained() {
        let spec = NodeGroupSpec {
            min_size: 1,
            max_size: 4,
            ..crate::test_support::node_group("g", 4).spec
        };
        let (value, reason, message) = at_min_size(&spec, 0);
        assert!(!value);
        assert_eq!(reason, "BelowMinSize");
        assert!(message.contains("below spec.minSize 1"), "{message}");
        assert_eq!(at_min_size(&spec, 1).1, "AtMinSize");
        assert!(at_min_size(&spec, 1).0);
        assert_eq!(at_min_size(&spec, 2).1, "AboveMinSize");
    }

    #[test]
    fn scaling_is_active_unless_the_group_can_never_grow() {
        let base = crate::test_support::node_group("g", 4).spec;
        let (active, reason, message) = scaling_active(&base);
        assert!(active);
        assert_eq!(reason, "Active");
        assert!(message.contains("spec.maxSize 4"), "{message}");
        let disabled = NodeGroupSpec {
            min_size: 0,
            max_size: 0,
            ..base
        };
        let (active, reason, _) = scaling_active(&disabled);
        assert!(!active);
        assert_eq!(reason, "ScalingDisabled");
    }
}
