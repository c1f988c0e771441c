//! The example node groups in `testdata/nodegroups/` parse and validate, and say what their
//! comments claim.

// Helpers outside #[test] fns are test code too; clippy.toml only covers the fns themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use dra_api::{CapacityType, NodeGroup};

fn example(name: &str) -> NodeGroup {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/nodegroups")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let group: NodeGroup = serde_saphyr::from_str(&text).unwrap();
    group
        .spec
        .validate()
        .unwrap_or_else(|err| panic!("{name}: {err}"));
    group
}

#[test]
fn h200_on_demand_has_eight_gpus_in_one_slice() {
    let group = example("h200-on-demand.yaml");
    assert_eq!(group.spec.capacity_type, CapacityType::OnDemand);
    assert!(group.spec.reservation.is_none());
    let slices = &group.spec.template.resource_slices;
    assert_eq!(slices.len(), 1);
    assert_eq!(slices[0].devices.as_ref().unwrap().len(), 8);
    assert_eq!(
        group.spec.template.effective_allocatable()["cpu"].0,
        "191450m"
    );
}

#[test]
fn h200_reserved_names_its_reservation() {
    let group = example("h200-reserved.yaml");
    assert_eq!(group.spec.capacity_type, CapacityType::Reserved);
    let reservation = group.spec.reservation.unwrap();
    assert_eq!(reservation.id, "cr-0a1b2c3d4e5f60718");
    assert_eq!(reservation.total, 8);
    assert_eq!(
        reservation.end_time.unwrap().0.to_string(),
        "2026-12-31T23:30:00Z"
    );
}

#[test]
fn partitionable_gpu_keeps_counters_in_their_own_slice() {
    let group = example("partitionable-gpu.yaml");
    let slices = &group.spec.template.resource_slices;
    assert_eq!(slices.len(), 2);
    assert!(slices[0].devices.is_none());
    assert_eq!(slices[0].shared_counters.as_ref().unwrap().len(), 2);
    let devices = slices[1].devices.as_ref().unwrap();
    assert_eq!(devices.len(), 10);
    assert!(
        devices
            .iter()
            .all(|d| d.consumes_counters.as_ref().is_some_and(|c| c.len() == 1))
    );
    assert!(slices.iter().all(|s| s.pool.resource_slice_count == 2));
}

#[test]
fn cpu_group_allocatable_defaults_to_capacity() {
    let group = example("cpu.yaml");
    assert!(group.spec.template.allocatable.is_none());
    assert_eq!(
        group.spec.template.effective_allocatable(),
        &group.spec.template.capacity
    );
    assert!(group.spec.template.resource_slices.is_empty());
}

#[test]
fn slices_for_node_fill_node_name_and_pool_name() {
    let group = example("partitionable-gpu.yaml");
    let slices = group
        .spec
        .template
        .slices_for_node("partitionable-gpu-abcde");
    assert!(
        slices
            .iter()
            .all(|s| s.node_name.as_deref() == Some("partitionable-gpu-abcde"))
    );
    assert!(
        slices
            .iter()
            .all(|s| s.pool.name == "partitionable-gpu-abcde")
    );
    assert_eq!(
        slices[1].devices,
        group.spec.template.resource_slices[1].devices
    );
}
