//! Each rule of `NodeGroupSpec::validate` rejects what it should, naming the field.

// Helpers outside #[test] fns are test code too; clippy.toml only covers the fns themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use dra_api::{CapacityType, NodeGroupSpec, Reservation, ValidationError};
use k8s_openapi::api::resource::v1::ResourceSliceSpec;

fn spec() -> NodeGroupSpec {
    serde_json::from_value(serde_json::json!({
        "provider": "fake",
        "providerID": "g1",
        "minSize": 0,
        "maxSize": 3,
        "capacityType": "on-demand",
        "pricePerHour": 1.5,
        "template": {"capacity": {"cpu": "4", "pods": "110"}}
    }))
    .unwrap()
}

fn errors(spec: &NodeGroupSpec) -> Vec<ValidationError> {
    spec.validate().unwrap_err().errors
}

fn slice(value: serde_json::Value) -> ResourceSliceSpec {
    serde_json::from_value(value).unwrap()
}

#[test]
fn a_minimal_spec_is_valid() {
    spec().validate().unwrap();
}

#[test]
fn min_above_max_is_rejected() {
    let mut s = spec();
    s.min_size = 4;
    assert_eq!(
        errors(&s),
        vec![ValidationError::MinAboveMax { min: 4, max: 3 }]
    );
    assert!(errors(&s)[0].to_string().contains("spec.minSize"));
}

#[test]
fn reserved_without_reservation_is_rejected() {
    let mut s = spec();
    s.capacity_type = CapacityType::Reserved;
    assert_eq!(errors(&s), vec![ValidationError::ReservationMissing]);
}

#[test]
fn reservation_on_spot_group_is_rejected() {
    let mut s = spec();
    s.capacity_type = CapacityType::Spot;
    s.reservation = Some(Reservation {
        id: "r".into(),
        total: 1,
        end_time: None,
    });
    assert_eq!(
        errors(&s),
        vec![ValidationError::ReservationNotAllowed {
            capacity_type: CapacityType::Spot
        }]
    );
}

#[test]
fn negative_reservation_total_is_rejected() {
    let mut s = spec();
    s.capacity_type = CapacityType::Reserved;
    s.reservation = Some(Reservation {
        id: "r".into(),
        total: -1,
        end_time: None,
    });
    let errs = errors(&s);
    assert_eq!(
        errs,
        vec![ValidationError::Negative {
            field: "spec.reservation.total",
            value: -1
        }]
    );
}

#[test]
fn negative_or_nan_price_is_rejected() {
    for price in [-0.5, f64::NAN, f64::INFINITY] {
        let mut s = spec();
        s.price_per_hour = price;
        let errs = errors(&s);
        assert!(
            matches!(errs[..], [ValidationError::BadPrice { .. }]),
            "{price}: {errs:?}"
        );
    }
}

#[test]
fn every_problem_is_reported_at_once() {
    let mut s = spec();
    s.provider = String::new();
    s.min_size = -1;
    s.price_per_hour = -1.0;
    let errs = errors(&s);
    assert_eq!(errs.len(), 3, "{errs:?}");
    let text = s.validate().unwrap_err().to_string();
    assert!(text.contains("spec.provider must not be empty"), "{text}");
    assert!(text.contains("spec.minSize must be >= 0, got -1"), "{text}");
}

#[test]
fn slice_with_devices_and_counters_is_rejected() {
    let mut s = spec();
    s.template.resource_slices = vec![slice(serde_json::json!({
        "driver": "gpu.example.com",
        "pool": {"name": "", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}],
        "sharedCounters": [{"name": "c", "counters": {"memory": {"value": "1Gi"}}}]
    }))];
    assert_eq!(
        errors(&s),
        vec![ValidationError::DevicesAndCounters { slice: 0 }]
    );
}

#[test]
fn empty_slice_and_all_nodes_slice_are_rejected() {
    let mut s = spec();
    s.template.resource_slices = vec![slice(serde_json::json!({
        "driver": "net.example.com",
        "pool": {"name": "", "generation": 1, "resourceSliceCount": 1},
        "allNodes": true
    }))];
    assert_eq!(
        errors(&s),
        vec![
            ValidationError::EmptySlice { slice: 0 },
            ValidationError::NotNodeLocal {
                slice: 0,
                field: "allNodes"
            }
        ]
    );
}

#[test]
fn duplicate_device_and_unknown_counter_set_are_rejected() {
    let mut s = spec();
    s.template.resource_slices = vec![slice(serde_json::json!({
        "driver": "gpu.example.com",
        "pool": {"name": "", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {"name": "gpu-0"},
            {"name": "gpu-0", "consumesCounters": [{"counterSet": "missing", "counters": {}}]}
        ]
    }))];
    let errs = errors(&s);
    assert!(
        matches!(&errs[0], ValidationError::Duplicate { what: "device", name, .. } if name == "gpu-0"),
        "{errs:?}"
    );
    assert!(
        matches!(&errs[1], ValidationError::UnknownCounterSet { counter_set, .. } if counter_set == "missing"),
        "{errs:?}"
    );
}

#[test]
fn wrong_resource_slice_count_is_rejected() {
    let mut s = spec();
    s.template.resource_slices = vec![slice(serde_json::json!({
        "driver": "gpu.example.com",
        "pool": {"name": "", "generation": 1, "resourceSliceCount": 2},
        "devices": [{"name": "gpu-0"}]
    }))];
    assert_eq!(
        errors(&s),
        vec![ValidationError::SliceCount {
            slice: 0,
            driver: "gpu.example.com".into(),
            declared: 2,
            actual: 1
        }]
    );
}

#[test]
fn scale_down_settings_are_checked_by_field() {
    let mut s = spec();
    s.scale_down = Some(
        serde_json::from_value(serde_json::json!({
            "utilizationThreshold": 1.5,
            "unneededTime": "ten minutes",
            "emptyUnneededTime": "1m",
            "removeReservedNodes": true
        }))
        .unwrap(),
    );
    let found = errors(&s);
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(found[0], ValidationError::BadThreshold { value: 1.5 });
    assert!(
        found[1]
            .to_string()
            .starts_with("spec.scaleDown.unneededTime: \"ten minutes\" is not a duration"),
        "{}",
        found[1]
    );
    assert_eq!(
        found[2],
        ValidationError::RemoveReservedNotReserved {
            capacity_type: CapacityType::OnDemand
        }
    );
}

#[test]
fn valid_scale_down_settings_pass() {
    let mut s = spec();
    s.scale_down = Some(
        serde_json::from_value(serde_json::json!({
            "enabled": true,
            "utilizationThreshold": 0.5,
            "unneededTime": "10m",
            "emptyUnneededTime": "30s"
        }))
        .unwrap(),
    );
    s.validate().unwrap();
    let policy = s.scale_down.as_ref().unwrap();
    assert_eq!(
        policy.unneeded_time().unwrap(),
        Some(k8s_openapi::jiff::SignedDuration::from_mins(10))
    );
}

#[test]
fn template_quantities_the_simulator_cannot_read_are_rejected() {
    // What `kubectl apply --validate=false` (or a provider's config file) may carry past the
    // CRD's pattern: each bad value is named by its field, good ones are not.
    let mut s = spec();
    s.template.capacity.insert(
        "cpu".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("lots".into()),
    );
    s.template.allocatable = Some(
        [("memory", "1.5.3Gi"), ("pods", "110")]
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.into()),
                )
            })
            .collect(),
    );
    let messages: Vec<String> = errors(&s).iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].starts_with("spec.template.capacity.cpu: invalid quantity \"lots\""),
        "{messages:?}"
    );
    assert!(
        messages[1].starts_with("spec.template.allocatable.memory: invalid quantity \"1.5.3Gi\""),
        "{messages:?}"
    );
}
