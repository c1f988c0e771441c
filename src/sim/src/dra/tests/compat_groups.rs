//! Device compatibility groups (KEP-5963): upstream's `compatibility-groups-*`
//! table cases (1.37 cycle), then our own cases for the same code paths: the
//! incubating allocator's skip while `DRADeviceCompatibilityGroups` is off
//! (`skipForDisabledCompatibilityGroups`) and the experimental allocator's
//! running intersection per counter set when it is on
//! (`compatibilityGroupIntersection`).

use super::harness::*;
use crate::dra::AllocateOutcome;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};

const DEVICE4: &str = "device-4";

fn groups_features(on: bool) -> Features {
    Features {
        partitionable_devices: true,
        compatibility_groups: on,
        ..Default::default()
    }
}

/// `device(name, nil, nil).withDeviceCounterConsumption(...)` drawing
/// `amount` of counter capacity-0 from `set`, with `groups` when given
/// (`deviceCounterConsumptionWithGroups`).
fn on_set(name: &str, set: &str, amount: &str, groups: Option<&[&str]>) -> Dev {
    let d = device(name).consumes(set, &[(CAPACITY0, amount)], false);
    match groups {
        Some(g) => d.groups(g),
        None => d,
    }
}

/// The devices in slice-1 and the counter sets (capacity-0 each) in slice-2.
fn pool_of(devices: Vec<Dev>, sets: &[(&str, &str)]) -> Vec<ResourceSlice> {
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
            sets.iter()
                .map(|(name, value)| counter_set(name, &[(CAPACITY0, value)]))
                .collect(),
        ),
    ]
}

fn results(r: &[(&str, &str)]) -> Expect {
    Expect::Results(vec![alloc(
        Some(local_selector(NODE1)),
        r.iter()
            .map(|(req, d)| res(req, DRIVER_A, POOL1, d, false))
            .collect(),
    )])
}

fn two_requests() -> Vec<ResourceClaim> {
    vec![claim(
        CLAIM0,
        vec![],
        vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
    )]
}

#[test]
fn compatibility_groups_compatible() {
    Case {
        features: groups_features(true),
        claims: two_requests(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "2", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET1, "2", Some(&["mig"])),
            ],
            &[(COUNTER_SET1, "4")],
        ),
        expect: results(&[(REQ0, DEVICE1), (REQ1, DEVICE2)]),
        ..Default::default()
    }
    .run("compatibility-groups-compatible");
}

#[test]
fn compatibility_groups_incompatible() {
    Case {
        features: groups_features(true),
        claims: two_requests(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "2", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET1, "2", Some(&["vgpu"])),
            ],
            &[(COUNTER_SET1, "4")],
        ),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("compatibility-groups-incompatible");
}

#[test]
fn compatibility_groups_taint_rollback() {
    Case {
        features: Features {
            device_taints: true,
            ..groups_features(true)
        },
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "2", Some(&["mig"])).taints(&[taint_no_schedule()]),
                on_set(DEVICE2, COUNTER_SET1, "2", Some(&["vgpu"])),
            ],
            &[(COUNTER_SET1, "4")],
        ),
        expect: results(&[(REQ0, DEVICE2)]),
        ..Default::default()
    }
    .run("compatibility-groups-taint-rollback");
}

fn with_allocated_peer(name: &str, candidate_group: &str, expect: Expect) {
    Case {
        features: groups_features(true),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "1", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET1, "1", Some(&[candidate_group])),
            ],
            &[(COUNTER_SET1, "4")],
        ),
        expect,
        ..Default::default()
    }
    .run(name);
}

#[test]
fn compatibility_groups_incompatible_with_allocated_peer() {
    with_allocated_peer(
        "compatibility-groups-incompatible-with-allocated-peer",
        "vgpu",
        Expect::NoFit,
    );
}

#[test]
fn compatibility_groups_compatible_with_allocated_peer() {
    with_allocated_peer(
        "compatibility-groups-compatible-with-allocated-peer",
        "mig",
        results(&[(REQ0, DEVICE2)]),
    );
}

#[test]
fn compatibility_groups_disabled_skips_grouped_device() {
    Case {
        features: groups_features(false),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "2", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET1, "2", None),
            ],
            &[(COUNTER_SET1, "4")],
        ),
        expect: results(&[(REQ0, DEVICE2)]),
        ..Default::default()
    }
    .run("compatibility-groups-disabled-skips-grouped-device");
}

#[test]
fn compatibility_groups_disabled_skips_peer_on_grouped_counterset() {
    Case {
        features: groups_features(false),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "1", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET1, "1", None),
            ],
            &[(COUNTER_SET1, "4")],
        ),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("compatibility-groups-disabled-skips-peer-on-grouped-counterset");
}

#[test]
fn compatibility_groups_disabled_skip_does_not_leak_counters() {
    Case {
        features: groups_features(false),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "1", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET1, "2", None),
            ],
            &[(COUNTER_SET1, "2")],
        ),
        expect: results(&[(REQ0, DEVICE2)]),
        ..Default::default()
    }
    .run("compatibility-groups-disabled-skip-does-not-leak-counters");
}

#[test]
fn compatibility_groups_multiple_counter_sets() {
    Case {
        features: groups_features(true),
        claims: two_requests(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "2", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET2, "2", Some(&["vgpu"])),
            ],
            &[(COUNTER_SET1, "4"), (COUNTER_SET2, "4")],
        ),
        expect: results(&[(REQ0, DEVICE1), (REQ1, DEVICE2)]),
        ..Default::default()
    }
    .run("compatibility-groups-multiple-counter-sets");
}

#[test]
fn compatibility_groups_multiple_counter_sets_spanning_device() {
    Case {
        features: groups_features(true),
        claims: two_requests(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "1", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET1, "1", Some(&["vgpu"]))
                    .consumes(COUNTER_SET2, &[(CAPACITY0, "1")], false)
                    .groups(&["vgpu"]),
            ],
            &[(COUNTER_SET1, "4"), (COUNTER_SET2, "4")],
        ),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("compatibility-groups-multiple-counter-sets-spanning-device");
}

#[test]
fn compatibility_groups_with_prioritized_list() {
    Case {
        features: Features {
            prioritized_list: true,
            ..groups_features(true)
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                request(REQ0, CLASS_A, 1),
                prioritized(
                    REQ1,
                    vec![
                        sub_request(SUB_REQ0, CLASS_A, 2),
                        sub_request(SUB_REQ1, CLASS_A, 1),
                    ],
                ),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "1", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET1, "1", Some(&["mig"])),
                on_set(DEVICE3, COUNTER_SET1, "1", Some(&["vgpu"])),
            ],
            &[(COUNTER_SET1, "4")],
        ),
        expect: results(&[(REQ0, DEVICE1), (REQ1_SUB_REQ1, DEVICE2)]),
        ..Default::default()
    }
    .run("compatibility-groups-with-prioritized-list");
}

#[test]
fn compatibility_groups_with_consumable_capacity() {
    let shared = |name: &str, group: &str| {
        device(name)
            .consumes(COUNTER_SET1, &[(CAPACITY0, "1")], true)
            .groups(&[group])
            .multi()
    };
    Case {
        features: Features {
            consumable_capacity: true,
            ..groups_features(true)
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                with_capacity_request(request(REQ0, CLASS_A, 1), Some("1")),
                with_capacity_request(request(REQ1, CLASS_A, 1), Some("1")),
            ],
        )],
        classes: vec![class_with_allow_multiple_allocations(
            CLASS_A, DRIVER_A, true,
        )],
        slices: pool_of(
            vec![
                shared(DEVICE1, "mig"),
                shared(DEVICE2, "vgpu"),
                shared(DEVICE3, "mig"),
            ],
            &[(COUNTER_SET1, "4")],
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[(CAPACITY0, "1")]),
                res_shared(REQ1, DRIVER_A, POOL1, DEVICE3, &[(CAPACITY0, "1")]),
            ],
        )]),
        ..Default::default()
    }
    .run("compatibility-groups-with-consumable-capacity");
}

fn two_claims_case(name: &str, second_group: &str, expect: Expect) {
    Case {
        features: groups_features(true),
        claims: vec![
            claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)]),
            claim(CLAIM1, vec![], vec![request(REQ0, CLASS_A, 1)]),
        ],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_of(
            vec![
                on_set(DEVICE1, COUNTER_SET1, "1", Some(&["mig"])),
                on_set(DEVICE2, COUNTER_SET1, "1", Some(&[second_group])),
            ],
            &[(COUNTER_SET1, "4")],
        ),
        expect,
        ..Default::default()
    }
    .run(name);
}

#[test]
fn compatibility_groups_multiple_claims() {
    two_claims_case(
        "compatibility-groups-multiple-claims",
        "mig",
        Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE2, false)],
            ),
        ]),
    );
}

#[test]
fn compatibility_groups_multiple_claims_incompatible() {
    two_claims_case(
        "compatibility-groups-multiple-claims-incompatible",
        "vgpu",
        Expect::NoFit,
    );
}

// Our own cases below.

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
        Ok(AllocateOutcome::Unschedulable { reasons }) => {
            reasons.iter().map(ToString::to_string).collect()
        }
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
