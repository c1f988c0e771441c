//! Device compatibility groups (KEP-5963). No upstream table cases exist for
//! them yet; these follow upstream's code: the incubating allocator's skip
//! while `DRADeviceCompatibilityGroups` is off
//! (`skipForDisabledCompatibilityGroups`) and the experimental allocator's
//! running intersection per counter set when it is on
//! (`compatibilityGroupIntersection`).

use super::harness::*;
use crate::dra::AllocateOutcome;

const DEVICE4: &str = "device-4";

fn partitionable(groups_on: bool) -> Features {
    Features {
        partitionable_devices: true,
        compatibility_groups: groups_on,
        ..Default::default()
    }
}

/// A device drawing one unit of counter `c` from `set`, with `groups`
/// (`None`: the field is not set).
fn dev(name: &str, set: &str, groups: Option<&[&str]>) -> Dev {
    let d = device(name).consumes(set, &[("c", "1")], false);
    match groups {
        Some(g) => d.groups(g),
        None => d,
    }
}

/// The devices in one slice and two counter sets with plenty of room.
fn slices(devices: Vec<Dev>) -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    vec![
        slice(
            SLICE1,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            devices,
        ),
        counter_slice(
            SLICE2,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![
                counter_set(COUNTER_SET1, &[("c", "10")]),
                counter_set(COUNTER_SET2, &[("c", "10")]),
            ],
        ),
    ]
}

fn picked(devices: &[&str]) -> Expect {
    Expect::Results(vec![alloc(
        Some(local_selector(NODE1)),
        devices
            .iter()
            .map(|d| res(REQ0, DRIVER_A, POOL1, d, false))
            .collect(),
    )])
}

fn one_request(count: i64) -> Vec<k8s_openapi::api::resource::v1::ResourceClaim> {
    vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, count)])]
}

#[test]
fn feature_off_skips_devices_that_declare_groups() {
    Case {
        features: partitionable(false),
        claims: one_request(1),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![
            dev(DEVICE1, COUNTER_SET1, Some(&["a"])),
            dev(DEVICE2, COUNTER_SET1, None),
        ]),
        expect: picked(&[DEVICE2]),
        ..Default::default()
    }
    .run("feature-off-skips-devices-that-declare-groups");
}

#[test]
fn feature_off_skips_devices_joining_a_set_with_a_grouped_allocation() {
    Case {
        features: partitionable(false),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        claims: one_request(1),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![
            dev(DEVICE1, COUNTER_SET1, Some(&["a"])),
            dev(DEVICE2, COUNTER_SET1, None),
            dev(DEVICE3, COUNTER_SET2, None),
        ]),
        // device2 draws from the set where the allocated device1 declared
        // groups; device3's set carries none.
        expect: picked(&[DEVICE3]),
        ..Default::default()
    }
    .run("feature-off-skips-devices-joining-a-set-with-a-grouped-allocation");
}

#[test]
fn feature_off_nothing_to_allocate_when_every_candidate_is_grouped() {
    Case {
        features: partitionable(false),
        claims: one_request(1),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![dev(DEVICE1, COUNTER_SET1, Some(&["a"]))]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("feature-off-nothing-to-allocate-when-every-candidate-is-grouped");
}

#[test]
fn feature_on_co_allocates_only_intersecting_groups() {
    Case {
        features: partitionable(true),
        claims: one_request(2),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![
            dev(DEVICE1, COUNTER_SET1, Some(&["a"])),
            dev(DEVICE2, COUNTER_SET1, Some(&["b"])),
            dev(DEVICE3, COUNTER_SET1, Some(&["a", "b"])),
        ]),
        expect: picked(&[DEVICE1, DEVICE3]),
        ..Default::default()
    }
    .run("feature-on-co-allocates-only-intersecting-groups");
}

#[test]
fn feature_on_group_less_devices_only_pair_with_group_less_devices() {
    Case {
        features: partitionable(true),
        claims: one_request(2),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![
            dev(DEVICE1, COUNTER_SET1, None),
            dev(DEVICE2, COUNTER_SET1, Some(&["a"])),
            dev(DEVICE3, COUNTER_SET1, Some(&[])),
        ]),
        // An empty list counts as no groups.
        expect: picked(&[DEVICE1, DEVICE3]),
        ..Default::default()
    }
    .run("feature-on-group-less-devices-only-pair-with-group-less-devices");
}

#[test]
fn feature_on_grouped_and_group_less_never_mix() {
    Case {
        features: partitionable(true),
        claims: one_request(2),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![
            dev(DEVICE1, COUNTER_SET1, None),
            dev(DEVICE2, COUNTER_SET1, Some(&["a"])),
        ]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("feature-on-grouped-and-group-less-never-mix");
}

#[test]
fn feature_on_allocated_peers_constrain_the_set() {
    Case {
        features: partitionable(true),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        claims: one_request(1),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![
            dev(DEVICE1, COUNTER_SET1, Some(&["a"])),
            dev(DEVICE2, COUNTER_SET1, Some(&["b"])),
            dev(DEVICE3, COUNTER_SET1, Some(&["c", "a"])),
        ]),
        expect: picked(&[DEVICE3]),
        ..Default::default()
    }
    .run("feature-on-allocated-peers-constrain-the-set");
}

#[test]
fn feature_on_counter_sets_are_independent() {
    Case {
        features: partitionable(true),
        claims: one_request(2),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![
            dev(DEVICE1, COUNTER_SET1, Some(&["a"])),
            dev(DEVICE2, COUNTER_SET2, Some(&["b"])),
        ]),
        expect: picked(&[DEVICE1, DEVICE2]),
        ..Default::default()
    }
    .run("feature-on-counter-sets-are-independent");
}

#[test]
fn feature_on_backtracking_restores_the_intersection() {
    Case {
        features: partitionable(true),
        claims: one_request(3),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![
            dev(DEVICE1, COUNTER_SET1, Some(&["a", "b"])),
            dev(DEVICE2, COUNTER_SET1, Some(&["a"])),
            dev(DEVICE3, COUNTER_SET1, Some(&["b"])),
            dev(DEVICE4, COUNTER_SET1, Some(&["b"])),
        ]),
        // {device1, device2} narrows to {a}, which neither later device
        // joins; dropping device2 must widen the set back to {a, b}.
        expect: picked(&[DEVICE1, DEVICE3, DEVICE4]),
        ..Default::default()
    }
    .run("feature-on-backtracking-restores-the-intersection");
}

fn reasons(case: &Case) -> Vec<String> {
    match case.outcome().0 {
        Ok(AllocateOutcome::Unschedulable { reasons }) => reasons,
        other => panic!("expected Unschedulable, got {other:?}"),
    }
}

#[test]
fn reasons_name_the_compatibility_groups() {
    let off = Case {
        features: partitionable(false),
        claims: one_request(1),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![dev(DEVICE1, COUNTER_SET1, Some(&["a"]))]),
        ..Default::default()
    };
    let r = reasons(&off);
    assert!(
        r[0].contains("device device-1 declares compatibility groups")
            && r[0].contains("DRADeviceCompatibilityGroups"),
        "{r:?}"
    );

    let on = Case {
        features: partitionable(true),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        claims: one_request(1),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slices(vec![
            dev(DEVICE1, COUNTER_SET1, Some(&["a"])),
            dev(DEVICE2, COUNTER_SET1, Some(&["b"])),
        ]),
        ..Default::default()
    };
    let r = reasons(&on);
    assert!(
        r[0].contains("device device-2: its compatibility groups on counter set counter-set-1 are incompatible"),
        "{r:?}"
    );
}
