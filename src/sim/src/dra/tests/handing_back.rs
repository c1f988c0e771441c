//! The catalog hands back the slices it was built with, as they were given: what the
//! planner's catalog does so that the scale-down analysis reads the cluster's slices
//! without a copy of every device (issue #28).

use k8s_openapi::api::resource::v1::{
    DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector, ResourceClaim, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::super::{AllocatedState, DraCatalog, ShareIdGenerator};
use super::harness::*;
use crate::gates::FeatureGates;

/// A rule tainting every device of `DRIVER_A`.
fn rule_for_driver_a() -> DeviceTaintRule {
    DeviceTaintRule {
        metadata: ObjectMeta {
            name: Some("maintenance".into()),
            ..Default::default()
        },
        spec: DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: Some(DRIVER_A.into()),
                ..Default::default()
            }),
            taint: taint("maintenance", "true", "NoSchedule"),
        },
        status: None,
    }
}

/// Slices of every shape the conversion treats apart: devices without taints and with
/// their own (both extended by the rule), another driver's (not extended), and
/// `devices` empty and unset.
fn given() -> Vec<ResourceSlice> {
    let mut empty = slice(SLICE3, Sel::All, pool(POOL3), DRIVER_A, vec![]);
    empty.spec.devices = Some(Vec::new());
    let unset = slice(SLICE4, Sel::Node(NODE2), pool(POOL4), DRIVER_B, vec![]);
    assert!(unset.spec.devices.is_none());
    vec![
        slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                device(DEVICE1).capacity(&[("memory", "40Gi")]),
                device(DEVICE2).taints(&[taint("own", "x", "NoExecute")]),
            ],
        ),
        slice(
            SLICE2,
            Sel::Node(NODE2),
            pool(POOL2),
            DRIVER_B,
            vec![device(DEVICE1)],
        ),
        empty,
        unset,
    ]
}

fn allocate_one(catalog: &mut DraCatalog, node: &str) {
    let claim: ResourceClaim = claim_with_request(CLAIM0, REQ0, CLASS_A);
    // The outcome does not matter here, only that node views (which share the
    // catalog's entries) exist when the slices are handed back.
    let _ = catalog.allocate(
        &node_named(node),
        &[&claim],
        &AllocatedState::default(),
        &mut ShareIdGenerator::default(),
    );
}

fn node_named(name: &str) -> k8s_openapi::api::core::v1::Node {
    node(name, REGION1)
}

#[test]
fn the_slices_come_back_as_given_without_the_rules_taints() {
    let gates = FeatureGates::default();
    assert!(gates.device_taints && gates.device_taint_rules);
    let mut catalog = DraCatalog::new_owning(
        gates,
        &[class(CLASS_A, DRIVER_A)],
        given(),
        &[rule_for_driver_a()],
    );
    allocate_one(&mut catalog, NODE1);
    // The rule applied: the catalog's copy of device-1 is tainted, so the only device of
    // node-1 a claim without tolerations could get is none.
    let claim = claim_with_request(CLAIM0, REQ0, CLASS_A);
    assert!(matches!(
        catalog.allocate(
            &node_named(NODE1),
            &[&claim],
            &AllocatedState::default(),
            &mut ShareIdGenerator::default(),
        ),
        Ok(super::super::AllocateOutcome::Unschedulable { .. })
    ));
    assert_eq!(catalog.into_initial_slices(), given());
}

#[test]
fn slices_added_later_are_dropped_and_given_ones_removed_since_come_back() {
    let mut catalog = DraCatalog::new_owning(
        FeatureGates::default(),
        &[class(CLASS_A, DRIVER_A)],
        given(),
        &[],
    );
    allocate_one(&mut catalog, NODE1);
    // A template node of the same name as a given node, added and rolled back, takes
    // the given node's slices out of the catalog with its own.
    catalog.add_slice(slice(
        "template-slice",
        Sel::Node(NODE1),
        pool("template-pool"),
        DRIVER_A,
        vec![device(DEVICE0)],
    ));
    catalog.remove_slices_for_node(NODE1);
    catalog.add_slice(slice(
        "later",
        Sel::Node("template-0"),
        pool("template-0-gpus"),
        DRIVER_A,
        vec![device(DEVICE0)],
    ));
    allocate_one(&mut catalog, "template-0");
    assert_eq!(catalog.into_initial_slices(), given());
}
