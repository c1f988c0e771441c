//! Upstream cases: partitionable devices (shared counters, per-device node
//! selection) and their validation.

use super::harness::*;
use k8s_openapi::api::resource::v1::{CounterSet, ResourceSlice};

fn partitionable() -> Features {
    Features {
        partitionable_devices: true,
        ..Default::default()
    }
}

fn partitionable_prioritized() -> Features {
    Features {
        partitionable_devices: true,
        prioritized_list: true,
        ..Default::default()
    }
}

fn counters(name: &str, counters: &[(&str, &str)]) -> Vec<CounterSet> {
    vec![counter_set(name, counters)]
}

/// A device slice plus a counter slice, both on node-1 in a two-slice pool.
fn pool_with(
    pool_name: &'static str,
    device_slice: &str,
    counter_slice_name: &str,
    devices: Vec<Dev>,
    sets: Vec<CounterSet>,
) -> Vec<ResourceSlice> {
    vec![
        slice(
            device_slice,
            Sel::Node(NODE1),
            resource_pool(pool_name, 2),
            DRIVER_A,
            devices,
        ),
        counter_slice(
            counter_slice_name,
            Sel::Node(NODE1),
            resource_pool(pool_name, 2),
            DRIVER_A,
            sets,
        ),
    ]
}

fn memory(gi: &str) -> [(&str, &str); 1] {
    [("memory", gi)]
}

#[test]
fn all_devices_with_consumed_counters() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![device(DEVICE1).consumes(COUNTER_SET1, &memory("4Gi"), false)],
            counters(COUNTER_SET1, &memory("8Gi")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("all-devices-with-consumed-counters");
}

#[test]
fn partitionable_devices_single_device() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![device(DEVICE1).consumes(COUNTER_SET1, &memory("4Gi"), false)],
            counters(COUNTER_SET1, &memory("8Gi")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-single-device");
}

fn four_six_four() -> Vec<Dev> {
    vec![
        device(DEVICE1).consumes(COUNTER_SET1, &memory("4Gi"), true),
        device(DEVICE2).consumes(COUNTER_SET1, &memory("6Gi"), true),
        device(DEVICE3).consumes(COUNTER_SET1, &memory("4Gi"), true),
    ]
}

fn six_or_four_gi() -> k8s_openapi::api::resource::v1::DeviceRequest {
    prioritized(
        REQ1,
        vec![
            sub_request_with(SUB_REQ0, CLASS_A, 1, memory_at_least(DRIVER_A, "6Gi")),
            sub_request_with(SUB_REQ1, CLASS_A, 1, memory_at_least(DRIVER_A, "4Gi")),
        ],
    )
}

#[test]
fn partitionable_devices_prioritized_list() {
    Case {
        features: partitionable_prioritized(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1), six_or_four_gi()],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            four_six_four(),
            counters(COUNTER_SET1, &memory("8Gi")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-prioritized-list");
}

#[test]
fn partitionable_devices_multiple_devices() {
    Case {
        features: partitionable(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            four_six_four(),
            counters(COUNTER_SET1, &memory("8Gi")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-multiple-devices");
}

#[test]
fn partitionable_devices_multiple_capacity_pools() {
    let dev = |name: &str, mem: &str, cpus: &str| {
        device(name)
            .consumes(COUNTER_SET1, &[("memory", mem)], true)
            .consumes(COUNTER_SET2, &[("cpus", cpus)], true)
    };
    Case {
        features: partitionable_prioritized(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1), six_or_four_gi()],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                dev(DEVICE1, "4Gi", "4"),
                dev(DEVICE2, "6Gi", "6"),
                dev(DEVICE3, "4Gi", "4"),
            ],
            vec![
                counter_set(COUNTER_SET1, &memory("18Gi")),
                counter_set(COUNTER_SET2, &[("cpus", "8")]),
            ],
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-multiple-capacity-pools");
}

#[test]
fn partitionable_devices_multiple_counters() {
    let dev = |name: &str, a: [(&str, &str); 2], b: [(&str, &str); 2]| {
        device(name)
            .consumes(COUNTER_SET1, &a, true)
            .consumes(COUNTER_SET2, &b, true)
    };
    Case {
        features: partitionable(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                dev(
                    DEVICE1,
                    [("memory", "4Gi"), ("cpus", "6")],
                    [("cpus", "4"), ("memory", "2Gi")],
                ),
                dev(
                    DEVICE2,
                    [("memory", "6Gi"), ("cpus", "4")],
                    [("cpus", "6"), ("memory", "6Gi")],
                ),
                dev(
                    DEVICE3,
                    [("memory", "4Gi"), ("cpus", "4")],
                    [("cpus", "4"), ("memory", "4Gi")],
                ),
            ],
            vec![
                counter_set(COUNTER_SET1, &[("cpus", "8"), ("memory", "18Gi")]),
                counter_set(COUNTER_SET2, &[("cpus", "12"), ("memory", "18Gi")]),
            ],
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-multiple-counters");
}

#[test]
fn partitionable_devices_multiple_pools() {
    let dev = |name: &str, cpus: &str, mem: &str| {
        device(name).consumes(COUNTER_SET1, &[("cpus", cpus), ("memory", mem)], true)
    };
    let sets = || {
        vec![counter_set(
            COUNTER_SET1,
            &[("cpus", "8"), ("memory", "18Gi")],
        )]
    };
    let mut slices = pool_with(
        POOL1,
        SLICE1,
        SLICE2,
        vec![
            dev(DEVICE1, "6", "4Gi"),
            dev(DEVICE2, "4", "6Gi"),
            dev(DEVICE3, "4", "4Gi"),
        ],
        sets(),
    );
    slices.extend(pool_with(
        POOL2,
        SLICE3,
        SLICE4,
        vec![
            dev(DEVICE1, "6", "4Gi"),
            dev(DEVICE2, "1", "7Gi"),
            dev(DEVICE3, "1", "7Gi"),
        ],
        sets(),
    ));
    Case {
        features: partitionable(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices,
        allocated: vec![
            id(DRIVER_A, POOL1, DEVICE2),
            id(DRIVER_A, POOL1, DEVICE3),
            id(DRIVER_A, POOL2, DEVICE1),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL2, DEVICE2, false),
                res(REQ1, DRIVER_A, POOL2, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-multiple-pools");
}

#[test]
fn partitionable_devices_unused_counters_in_counter_set() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                device(DEVICE1).consumes(COUNTER_SET1, &memory("5Gi"), false),
                device(DEVICE2).consumes(COUNTER_SET1, &memory("4Gi"), false),
                device(DEVICE3).consumes(COUNTER_SET1, &memory("4Gi"), false),
            ],
            counters(COUNTER_SET1, &[("memory", "8Gi"), ("unused", "1Gi")]),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                res(REQ0, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-unused-counters-in-counter-set");
}

#[test]
fn partitionable_devices_no_capacity_available() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![
                    device(DEVICE1).consumes(COUNTER_SET1, &memory("4Gi"), true),
                    device(DEVICE2).consumes(COUNTER_SET1, &memory("16Gi"), true),
                ],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                counters(COUNTER_SET1, &memory("18Gi")),
            ),
        ],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE2)],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("partitionable-devices-no-capacity-available");
}

#[test]
fn partitionable_devices_overallocated_capacity_pool() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![
                    device(DEVICE1).consumes(COUNTER_SET1, &memory("4Gi"), true),
                    device(DEVICE2).consumes(COUNTER_SET1, &memory("20Gi"), true),
                ],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                counters(COUNTER_SET1, &memory("18Gi")),
            ),
        ],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE2)],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("partitionable-devices-overallocated-capacity-pool");
}

#[test]
fn partitionable_devices_disabled_device_consumes_counters() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![device(DEVICE1).consumes(COUNTER_SET1, &memory("4Gi"), false)],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                counters(COUNTER_SET1, &memory("18Gi")),
            ),
        ],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("partitionable-devices-disabled-device-consumes-counters");
}

#[test]
fn partitionable_devices_disabled_other_device_do_not_consume_counters() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                device(DEVICE1).consumes(COUNTER_SET1, &memory("4Gi"), false),
                device(DEVICE2),
            ],
            counters(COUNTER_SET1, &memory("18Gi")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE2, false)],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-disabled-other-device-do-not-consume-counters");
}

#[test]
fn partitionable_devices_disabled_per_device_node_selection() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::PerDevice,
            pool(POOL1),
            DRIVER_A,
            vec![device(DEVICE2).on_node(NODE1)],
        )],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("partitionable-devices-disabled-per-device-node-selection");
}

fn per_device_pool(devices: Vec<Dev>, sets: Vec<CounterSet>) -> Vec<ResourceSlice> {
    vec![
        slice(
            SLICE1,
            Sel::PerDevice,
            resource_pool(POOL1, 2),
            DRIVER_A,
            devices,
        ),
        counter_slice(
            SLICE2,
            Sel::PerDevice,
            resource_pool(POOL1, 2),
            DRIVER_A,
            sets,
        ),
    ]
}

#[test]
fn partitionable_devices_per_device_node_selection_nodename() {
    Case {
        features: partitionable_prioritized(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![prioritized(
                REQ0,
                vec![
                    sub_request_with(SUB_REQ0, CLASS_A, 1, memory_at_least(DRIVER_A, "6Gi")),
                    sub_request_with(SUB_REQ1, CLASS_A, 1, memory_at_least(DRIVER_A, "4Gi")),
                ],
            )],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: per_device_pool(
            vec![
                device(DEVICE1)
                    .consumes(COUNTER_SET1, &memory("4Gi"), true)
                    .on_node(NODE1),
                device(DEVICE2)
                    .consumes(COUNTER_SET1, &memory("6Gi"), true)
                    .on_node(NODE2),
            ],
            counters(COUNTER_SET1, &memory("18Gi")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-per-device-node-selection-nodename");
}

#[test]
fn partitionable_devices_per_device_node_selection_node_selector() {
    Case {
        features: partitionable_prioritized(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: per_device_pool(
            vec![
                device(DEVICE1)
                    .consumes(COUNTER_SET1, &memory("4Gi"), true)
                    .on_selected_nodes(label_selector(REGION_KEY, &[REGION1])),
            ],
            counters(COUNTER_SET1, &memory("18Gi")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(label_selector(REGION_KEY, &[REGION1])),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-per-device-node-selection-node-selector");
}

#[test]
fn partitionable_devices_per_device_node_selection_node_selector_multiple_devices() {
    let mut slices = per_device_pool(
        vec![
            device(DEVICE1)
                .consumes(COUNTER_SET1, &memory("4Gi"), true)
                .on_selected_nodes(label_selector(REGION_KEY, &[REGION1])),
            device(DEVICE2)
                .consumes(COUNTER_SET1, &memory("4Gi"), true)
                .on_node(NODE1),
            device(DEVICE3)
                .consumes(COUNTER_SET1, &memory("4Gi"), true)
                .on_all_nodes(),
        ],
        counters(COUNTER_SET1, &memory("18Gi")),
    );
    slices.push(slice(
        SLICE3,
        Sel::Node(NODE1),
        resource_pool(POOL2, 2),
        DRIVER_B,
        vec![
            device(DEVICE1).consumes(COUNTER_SET2, &memory("4Gi"), true),
            device(DEVICE2).consumes(COUNTER_SET2, &memory("4Gi"), true),
            device(DEVICE3).consumes(COUNTER_SET2, &memory("4Gi"), true),
        ],
    ));
    slices.push(counter_slice(
        SLICE4,
        Sel::Node(NODE1),
        resource_pool(POOL2, 2),
        DRIVER_B,
        counters(COUNTER_SET2, &memory("12Gi")),
    ));
    Case {
        features: partitionable_prioritized(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 3), request(REQ1, CLASS_B, 3)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices,
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                res(REQ0, DRIVER_A, POOL1, DEVICE3, false),
                res(REQ1, DRIVER_B, POOL2, DEVICE1, false),
                res(REQ1, DRIVER_B, POOL2, DEVICE2, false),
                res(REQ1, DRIVER_B, POOL2, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-per-device-node-selection-node-selector-multiple-devices");
}

#[test]
fn partitionable_devices_with_attribute_selector() {
    let dev = |name: &str, special: bool, cpu: &str| {
        device(name)
            .attrs(&[("special", bool_attr(special))])
            .consumes(COUNTER_SET1, &[(cpu, "1")], false)
            .consumes(COUNTER_SET2, &[("mem", "10Gi")], false)
    };
    Case {
        features: partitionable(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                request(REQ0, CLASS_A, 2),
                request_with(
                    REQ1,
                    CLASS_A,
                    1,
                    vec![cel(&format!(r#"device.attributes["{DRIVER_A}"].special"#))],
                ),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                dev(DEVICE1, true, "cpu1"),
                dev(DEVICE2, false, "cpu2"),
                dev(DEVICE3, false, "cpu3"),
            ],
            vec![
                counter_set(COUNTER_SET1, &[("cpu1", "1"), ("cpu2", "1"), ("cpu3", "1")]),
                counter_set(COUNTER_SET2, &[("mem", "30Gi")]),
            ],
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                res(REQ0, DRIVER_A, POOL1, DEVICE3, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-with-attribute-selector");
}

#[test]
fn partitionable_devices_same_counter_set_name_in_different_resource_slices() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                vec![device(DEVICE1)],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                counters(COUNTER_SET1, &[]),
            ),
            slice(
                SLICE3,
                Sel::Node(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                vec![device(DEVICE2)],
            ),
            counter_slice(
                SLICE4,
                Sel::Node(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                counters(COUNTER_SET1, &[]),
            ),
        ],
        expect: Expect::FailedOnNode("invalid resource pools were encountered"),
        ..Default::default()
    }
    .run("partitionable-devices-same-counter-set-name-in-different-resource-slices");
}

#[test]
fn partitionable_devices_device_counter_consumption_references_unknown_counter_set() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![device(DEVICE1).consumes(COUNTER_SET2, &[], false)],
            counters(COUNTER_SET1, &[]),
        ),
        expect: Expect::FailedOnNode("invalid resource pools were encountered"),
        ..Default::default()
    }
    .run("partitionable-devices-device-counter-consumption-references-unknown-counter-set");
}

#[test]
fn partitionable_devices_device_counter_consumption_references_unknown_counter_in_counter_set() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![device(DEVICE1).consumes(COUNTER_SET1, &memory("8Gi"), false)],
            counters(COUNTER_SET1, &[("other-memory", "8Gi")]),
        ),
        expect: Expect::FailedOnNode("invalid resource pools were encountered"),
        ..Default::default()
    }
    .run("partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set");
}

#[test]
fn partitionable_devices_device_counter_consumption_references_counter_set_in_other_pool() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![device(DEVICE1).consumes(COUNTER_SET1, &memory("8Gi"), false)],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                pool(POOL2),
                DRIVER_A,
                counters(COUNTER_SET1, &memory("8Gi")),
            ),
        ],
        expect: Expect::FailedOnNode("invalid resource pools were encountered"),
        ..Default::default()
    }
    .run("partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool");
}

#[test]
fn partitionable_devices_devices_on_different_nodes_consume_same_counter_set() {
    Case {
        features: partitionable_prioritized(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![prioritized(
                REQ0,
                vec![
                    sub_request_with(SUB_REQ0, CLASS_A, 1, memory_at_least(DRIVER_A, "6Gi")),
                    sub_request_with(SUB_REQ1, CLASS_A, 1, memory_at_least(DRIVER_A, "2Gi")),
                ],
            )],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            counter_slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 3),
                DRIVER_A,
                counters(COUNTER_SET1, &memory("8Gi")),
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 3),
                DRIVER_A,
                vec![
                    device(DEVICE1).consumes(COUNTER_SET1, &memory("6Gi"), true),
                    device(DEVICE2).consumes(COUNTER_SET1, &memory("2Gi"), true),
                ],
            ),
            slice(
                SLICE3,
                Sel::Node(NODE2),
                resource_pool(POOL1, 3),
                DRIVER_A,
                vec![device(DEVICE3).consumes(COUNTER_SET1, &memory("6Gi"), false)],
            ),
        ],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE3)],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false)],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-devices-on-different-nodes-consume-same-counter-set");
}

#[test]
fn partitionable_devices_devices_consume_counter_set_in_different_nodes() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            counter_slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 3),
                DRIVER_A,
                counters(COUNTER_SET1, &memory("8Gi")),
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 3),
                DRIVER_A,
                vec![device(DEVICE1).consumes(COUNTER_SET1, &memory("6Gi"), true)],
            ),
            slice(
                SLICE3,
                Sel::Node(NODE2),
                resource_pool(POOL1, 3),
                DRIVER_A,
                vec![
                    device(DEVICE2).consumes(COUNTER_SET1, &memory("6Gi"), true),
                    device(DEVICE3).consumes(COUNTER_SET1, &memory("2Gi"), true),
                ],
            ),
        ],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        node: node(NODE2, REGION1),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE2)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE3, false)],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-devices-consume-counter-set-in-different-nodes");
}

#[test]
fn partitionable_devices_validation_error_on_non_targeting_slice() {
    Case {
        features: partitionable(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            counter_slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 3),
                DRIVER_A,
                counters(COUNTER_SET1, &memory("8Gi")),
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 3),
                DRIVER_A,
                vec![device(DEVICE1).consumes(COUNTER_SET1, &memory("6Gi"), true)],
            ),
            slice(
                SLICE3,
                Sel::Node(NODE2),
                resource_pool(POOL1, 3),
                DRIVER_A,
                vec![device(DEVICE3).consumes(COUNTER_SET2, &memory("6Gi"), false)],
            ),
        ],
        expect: Expect::FailedOnNode("invalid resource pools were encountered"),
        ..Default::default()
    }
    .run("partitionable-devices-validation-error-on-non-targeting-slice");
}

// Cases added upstream in the 1.37 cycle with the counter-cache keying by
// pool ID and the complete rollback of rejected candidates (kubernetes#140431).

fn c(amount: &str) -> [(&str, &str); 1] {
    [("c", amount)]
}

fn one_request(
    claim_name: &str,
    request: &str,
    class: &str,
) -> k8s_openapi::api::resource::v1::ResourceClaim {
    claim(
        claim_name,
        vec![],
        vec![request_with_count(request, class, 1)],
    )
}

fn request_with_count(
    name: &str,
    class: &str,
    count: i64,
) -> k8s_openapi::api::resource::v1::DeviceRequest {
    request(name, class, count)
}

fn kind(value: &str) -> k8s_openapi::api::resource::v1::DeviceSelector {
    cel(&format!(
        r#"device.attributes["{DRIVER_A}"].kind == "{value}""#
    ))
}

#[test]
fn partitionable_all_mode_constraint_must_error_with_reserved_counter() {
    Case {
        features: partitionable(),
        claims: vec![claim(
            CLAIM0,
            vec![match_attribute(&[], &format!("{DRIVER_A}/numa"))],
            vec![all_request(REQ0, CLASS_A)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                device(DEVICE1).attrs(&[("numa", int_attr(1))]),
                device(DEVICE2)
                    .attrs(&[("numa", int_attr(2))])
                    .consumes(COUNTER_SET1, &c("1"), false),
            ],
            counters(COUNTER_SET1, &c("1")),
        ),
        expect: Expect::Error(
            "claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied",
        ),
        ..Default::default()
    }
    .run("partitionable-all-mode-constraint-must-error-with-reserved-counter");
}

#[test]
fn partitionable_devices_counter_quantities_are_not_modified() {
    Case {
        features: partitionable(),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        claims: vec![one_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                device(DEVICE1).consumes(COUNTER_SET1, &c("9000000000000000000"), false),
                device(DEVICE2).consumes(COUNTER_SET1, &c("1"), false),
            ],
            counters(COUNTER_SET1, &c("10000000000000000000")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE2, false)],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-counter-quantities-are-not-modified");
}

/// driver-a and driver-b each publish a pool named pool-1 (slices 1+2 and
/// 3+4) with the given device consumption and counter sets.
fn same_pool_name_two_drivers(
    a_device: Dev,
    a_sets: Vec<CounterSet>,
    b_device: Dev,
    b_sets: Vec<CounterSet>,
) -> Vec<ResourceSlice> {
    let part = |name: &str, driver: &str, devices: Vec<Dev>| {
        slice(
            name,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            driver,
            devices,
        )
    };
    let sets = |name: &str, driver: &str, sets: Vec<CounterSet>| {
        counter_slice(
            name,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            driver,
            sets,
        )
    };
    vec![
        part(SLICE1, DRIVER_A, vec![a_device]),
        sets(SLICE2, DRIVER_A, a_sets),
        part(SLICE3, DRIVER_B, vec![b_device]),
        sets(SLICE4, DRIVER_B, b_sets),
    ]
}

fn two_drivers_claims() -> Vec<k8s_openapi::api::resource::v1::ResourceClaim> {
    vec![
        one_request(CLAIM0, REQ0, CLASS_A),
        one_request(CLAIM1, REQ1, CLASS_B),
    ]
}

#[test]
fn partitionable_devices_counter_cache_scoped_by_pool_id() {
    Case {
        features: partitionable(),
        claims: two_drivers_claims(),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: same_pool_name_two_drivers(
            device(DEVICE1).consumes(COUNTER_SET1, &c("1"), false),
            counters(COUNTER_SET1, &c("1")),
            device(DEVICE2).consumes(COUNTER_SET1, &c("2"), false),
            counters(COUNTER_SET1, &c("2")),
        ),
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ1, DRIVER_B, POOL1, DEVICE2, false)],
            ),
        ]),
        ..Default::default()
    }
    .run("partitionable-devices-counter-cache-scoped-by-pool-ID");
}

#[test]
fn partitionable_devices_counter_cache_not_crossed_between_driver_schemas() {
    Case {
        features: partitionable(),
        claims: two_drivers_claims(),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: same_pool_name_two_drivers(
            device(DEVICE1).consumes(COUNTER_SET1, &c("1"), false),
            counters(COUNTER_SET1, &c("1")),
            device(DEVICE2).consumes(COUNTER_SET2, &[("d", "2")], false),
            counters(COUNTER_SET2, &[("d", "1")]),
        ),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("partitionable-devices-counter-cache-not-crossed-between-driver-schemas");
}

#[test]
fn partitionable_devices_taint_releases_counter() {
    Case {
        features: Features {
            device_taints: true,
            ..partitionable()
        },
        claims: vec![one_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                device(DEVICE1).taints(&[taint_no_schedule()]).consumes(
                    COUNTER_SET1,
                    &c("1"),
                    false,
                ),
                device(DEVICE2).consumes(COUNTER_SET1, &c("1"), false),
            ],
            counters(COUNTER_SET1, &c("1")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE2, false)],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-taint-releases-counter");
}

#[test]
fn partitionable_devices_constraint_releases_counter() {
    let colored = |name: &str, color: &str| {
        device(name)
            .attrs(&[("stringAttribute", string_attr(color))])
            .consumes(COUNTER_SET1, &c("1"), false)
    };
    Case {
        features: partitionable(),
        claims: vec![claim(
            CLAIM0,
            vec![match_attribute(&[], &format!("{DRIVER_A}/stringAttribute"))],
            vec![request(REQ0, CLASS_A, 2)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                colored(DEVICE1, "red"),
                colored(DEVICE2, "blue"),
                colored(DEVICE3, "blue"),
            ],
            counters(COUNTER_SET1, &c("2")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                res(REQ0, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-constraint-releases-counter");
}

#[test]
fn partitionable_consumable_capacity_backtrack_releases_counter() {
    Case {
        features: Features {
            consumable_capacity: true,
            ..partitionable()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                request_with(REQ0, CLASS_A, 1, vec![kind("shared")]),
                request_with(REQ1, CLASS_A, 1, vec![kind("counteronly")]),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                device(DEVICE1)
                    .attrs(&[("kind", string_attr("shared"))])
                    .multi()
                    .consumes(COUNTER_SET1, &c("1"), false),
                device(DEVICE2).attrs(&[("kind", string_attr("shared"))]),
                device(DEVICE3)
                    .attrs(&[("kind", string_attr("counteronly"))])
                    .consumes(COUNTER_SET1, &c("1"), false),
            ],
            counters(COUNTER_SET1, &c("1")),
        ),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-consumable-capacity-backtrack-releases-counter");
}

#[test]
fn partitionable_empty_capacity_multiple_share_backtrack_keeps_counter_ownership() {
    let attrs = |k: &str, color: &str| {
        vec![
            ("kind", string_attr(k)),
            ("stringAttribute", string_attr(color)),
        ]
    };
    let with = |name: &str, k: &str, color: &str| device(name).attrs(&attrs(k, color));
    Case {
        features: Features {
            consumable_capacity: true,
            ..partitionable()
        },
        claims: vec![
            claim(
                CLAIM0,
                vec![],
                vec![request_with(REQ0, CLASS_A, 1, vec![kind("shared")])],
            ),
            claim(
                CLAIM1,
                vec![match_attribute(
                    &[REQ1, REQ2],
                    &format!("{DRIVER_A}/stringAttribute"),
                )],
                vec![
                    request_with(
                        REQ1,
                        CLASS_A,
                        1,
                        vec![cel(&format!(
                            r#"device.attributes["{DRIVER_A}"].kind == "shared" || device.attributes["{DRIVER_A}"].kind == "fallback""#
                        ))],
                    ),
                    request_with(REQ2, CLASS_A, 1, vec![kind("gate")]),
                    request_with("req-3", CLASS_A, 1, vec![kind("shared")]),
                ],
            ),
        ],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: pool_with(
            POOL1,
            SLICE1,
            SLICE2,
            vec![
                with(DEVICE1, "shared", "red")
                    .multi()
                    .consumes(COUNTER_SET1, &c("1"), false),
                with(DEVICE2, "fallback", "blue"),
                with(DEVICE3, "gate", "blue"),
            ],
            counters(COUNTER_SET1, &c("1")),
        ),
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[])],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![
                    res(REQ1, DRIVER_A, POOL1, DEVICE2, false),
                    res(REQ2, DRIVER_A, POOL1, DEVICE3, false),
                    res_shared("req-3", DRIVER_A, POOL1, DEVICE1, &[]),
                ],
            ),
        ]),
        ..Default::default()
    }
    .run("partitionable-empty-capacity-multiple-share-backtrack-keeps-counter-ownership");
}
