//! The scale-down settings that apply to one node group: its `spec.scaleDown` over the
//! controller-wide defaults.

use dra_api::{CapacityType, NodeGroupSpec};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::reasons::ReservedHold;

/// Controller-wide defaults (the `--scale-down-*` flags). cluster-autoscaler's defaults where
/// it has one: enabled, threshold 0.5, unneeded time 10 minutes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleDownDefaults {
    /// Whether nodes are removed at all.
    pub enabled: bool,
    /// A node below this utilisation is underused.
    pub utilization_threshold: f64,
    /// How long a node stays unneeded before it goes.
    pub unneeded_time: SignedDuration,
    /// The same for a node with no pod to move.
    pub empty_unneeded_time: SignedDuration,
}

impl Default for ScaleDownDefaults {
    fn default() -> Self {
        Self {
            enabled: true,
            utilization_threshold: 0.5,
            unneeded_time: SignedDuration::from_mins(10),
            empty_unneeded_time: SignedDuration::from_mins(1),
        }
    }
}

/// The settings of one group, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupSettings {
    /// Whether its nodes may be removed.
    pub enabled: bool,
    /// Underused below this.
    pub utilization_threshold: f64,
    /// Unneeded this long before removal.
    pub unneeded_time: SignedDuration,
    /// The same for empty nodes.
    pub empty_unneeded_time: SignedDuration,
    /// Fewest nodes the group keeps.
    pub min_size: usize,
    /// Why its nodes are kept whatever else holds (a reserved group before its reservation
    /// ends), if so.
    pub reserved_hold: Option<ReservedHold>,
    /// `pricePerHour`, to remove the most expensive nodes first.
    pub price_per_hour: f64,
    /// Whether the group is reserved capacity (removed last).
    pub reserved: bool,
}

impl GroupSettings {
    /// Resolves `spec` over `defaults` at `now` (unknown in a simulation without `--now`: a
    /// reservation's end is then never reached). Durations were checked by validation; one
    /// that does not parse falls back to the default.
    #[must_use]
    pub fn resolve(
        spec: &NodeGroupSpec,
        defaults: &ScaleDownDefaults,
        now: Option<Timestamp>,
    ) -> Self {
        let policy = spec.scale_down.clone().unwrap_or_default();
        let reserved = spec.capacity_type == CapacityType::Reserved;
        let reserved_hold = if reserved && policy.remove_reserved_nodes != Some(true) {
            let reservation = spec.reservation.as_ref();
            let end = reservation.and_then(|r| r.end_time.as_ref()).map(|t| t.0);
            let reservation = reservation.map(|r| r.id.clone()).unwrap_or_default();
            match (end, now) {
                (Some(end), Some(now)) if end <= now => None,
                (ends, _) => Some(ReservedHold { reservation, ends }),
            }
        } else {
            None
        };
        Self {
            enabled: policy.enabled.unwrap_or(defaults.enabled),
            utilization_threshold: policy
                .utilization_threshold
                .unwrap_or(defaults.utilization_threshold),
            unneeded_time: policy
                .unneeded_time()
                .ok()
                .flatten()
                .unwrap_or(defaults.unneeded_time),
            empty_unneeded_time: policy
                .empty_unneeded_time()
                .ok()
                .flatten()
                .unwrap_or(defaults.empty_unneeded_time),
            min_size: usize::try_from(spec.min_size.max(0)).unwrap_or(0),
            reserved_hold,
            price_per_hour: spec.price_per_hour,
            reserved,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn spec(extra: serde_json::Value) -> NodeGroupSpec {
        let mut value = serde_json::json!({
            "provider": "fake", "providerID": "g", "minSize": 1, "maxSize": 4,
            "capacityType": "on-demand", "pricePerHour": 2.0,
            "template": {"capacity": {"cpu": "4"}}
        });
        if let (Some(base), Some(more)) = (value.as_object_mut(), extra.as_object()) {
            base.extend(more.clone());
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn group_settings_override_the_defaults_field_by_field() {
        let defaults = ScaleDownDefaults::default();
        let plain = GroupSettings::resolve(&spec(serde_json::json!({})), &defaults, None);
        assert_eq!(plain.utilization_threshold, 0.5);
        assert_eq!(plain.unneeded_time, SignedDuration::from_mins(10));
        assert!(plain.enabled && plain.reserved_hold.is_none());
        let custom = GroupSettings::resolve(
            &spec(
                serde_json::json!({"scaleDown": {"utilizationThreshold": 0.2, "unneededTime": "30m"}}),
            ),
            &defaults,
            None,
        );
        assert_eq!(custom.utilization_threshold, 0.2);
        assert_eq!(custom.unneeded_time, SignedDuration::from_mins(30));
        assert_eq!(custom.empty_unneeded_time, defaults.empty_unneeded_time);
        assert_eq!(custom.min_size, 1);
    }

    #[test]
    fn reserved_nodes_are_held_until_the_reservation_ends_or_opt_in() {
        let defaults = ScaleDownDefaults::default();
        let reserved = spec(serde_json::json!({
            "capacityType": "reserved",
            "reservation": {"id": "cr-1", "total": 4, "endTime": "2026-12-01T00:00:00Z"}
        }));
        let before: Timestamp = "2026-11-30T00:00:00Z".parse().unwrap();
        let after: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let held = GroupSettings::resolve(&reserved, &defaults, Some(before));
        assert!(
            held.reserved_hold
                .unwrap()
                .to_string()
                .starts_with("reserved capacity")
        );
        assert!(
            GroupSettings::resolve(&reserved, &defaults, None)
                .reserved_hold
                .is_some(),
            "without a clock the end is never reached"
        );
        assert_eq!(
            GroupSettings::resolve(&reserved, &defaults, Some(after)).reserved_hold,
            None
        );
        let mut opted = reserved.clone();
        opted.scale_down = Some(dra_api::ScaleDownPolicy {
            remove_reserved_nodes: Some(true),
            ..Default::default()
        });
        assert_eq!(
            GroupSettings::resolve(&opted, &defaults, Some(before)).reserved_hold,
            None
        );
    }
}
