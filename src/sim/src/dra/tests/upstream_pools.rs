//! Upstream cases: multi-host pools, generations, invalid and incomplete
//! pools, and the combination search (with upstream's step counts).

use super::harness::*;
use k8s_openapi::api::resource::v1::ResourceSlice;

fn with_generation(mut s: ResourceSlice, generation: i64, count: i64) -> ResourceSlice {
    s.spec.pool.generation = generation;
    s.spec.pool.resource_slice_count = count;
    s
}

fn one(name: &str, node: &'static str, device_name: &str) -> ResourceSlice {
    slice(
        name,
        Sel::Node(node),
        pool(POOL1),
        DRIVER_A,
        vec![device(device_name)],
    )
}

fn device1_on_node1() -> Expect {
    Expect::Results(vec![alloc(
        Some(local_selector(NODE1)),
        vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
    )])
}

#[test]
fn allocation_mode_all_with_multi_host_resource_pool() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE1)],
            ),
            slice(
                SLICE2,
                Sel::Node(NODE2),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE2)],
            ),
        ],
        expect: device1_on_node1(),
        ..Default::default()
    }
    .run("allocation-mode-all-with-multi-host-resource-pool");
}

#[test]
fn multi_host_resource_pool_with_stale_slice_for_current_node() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            with_generation(one(SLICE1, NODE1, DEVICE1), 1, 2),
            with_generation(one(SLICE2, NODE2, DEVICE2), 2, 2),
        ],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("multi-host-resource-pool-with-stale-slice-for-current-node");
}

#[test]
fn multi_host_resource_pool_complete_update_from_node_1_to_node_2() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            with_generation(one(SLICE1, NODE1, DEVICE1), 1, 2),
            with_generation(one(SLICE1, NODE1, DEVICE2), 1, 2),
            with_generation(one(SLICE2, NODE2, DEVICE1), 2, 2),
            with_generation(one(SLICE2, NODE2, DEVICE2), 2, 2),
        ],
        // Upstream allocates from the old generation: the node's slices are complete.
        expect: device1_on_node1(),
        ..Default::default()
    }
    .run("multi-host-resource-pool-complete-update-from-node-1-to-node-2");
}

#[test]
fn multi_host_resource_pool_complete_update_from_node_2_to_node_1() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            with_generation(one(SLICE1, NODE2, DEVICE1), 1, 2),
            with_generation(one(SLICE1, NODE2, DEVICE2), 1, 2),
            with_generation(one(SLICE2, NODE1, DEVICE1), 2, 2),
            with_generation(one(SLICE2, NODE1, DEVICE2), 2, 2),
        ],
        expect: device1_on_node1(),
        ..Default::default()
    }
    .run("multi-host-resource-pool-complete-update-from-node-2-to-node-1");
}

#[test]
fn multi_host_resource_pool_incomplete_update_from_node_1_to_node_2() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            with_generation(one(SLICE1, NODE1, DEVICE1), 1, 2),
            with_generation(one(SLICE1, NODE1, DEVICE2), 1, 2),
            with_generation(one(SLICE2, NODE2, DEVICE1), 2, 2),
        ],
        expect: device1_on_node1(),
        ..Default::default()
    }
    .run("multi-host-resource-pool-incomplete-update-from-node-1-to-node-2");
}

#[test]
fn multi_host_resource_pool_incomplete_update_from_node_2_to_node_1() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            with_generation(one(SLICE1, NODE2, DEVICE1), 1, 2),
            with_generation(one(SLICE1, NODE2, DEVICE2), 1, 2),
            with_generation(one(SLICE2, NODE1, DEVICE1), 2, 2),
        ],
        // Not allocated: slice-2's generation is incomplete.
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("multi-host-resource-pool-incomplete-update-from-node-2-to-node-1");
}

#[test]
fn different_resourceslices_in_pool_can_target_different_nodes() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE2),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE1)],
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE2)],
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE2, false)],
        )]),
        ..Default::default()
    }
    .run("different-resourceslices-in-pool-can-target-different-nodes");
}

fn duplicate_pool_and_one_good() -> Vec<ResourceSlice> {
    vec![
        slice(
            SLICE1,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![device(DEVICE1)],
        ),
        slice(
            SLICE2,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![device(DEVICE1)],
        ),
        slice(
            SLICE3,
            Sel::Node(NODE1),
            resource_pool(POOL2, 1),
            DRIVER_A,
            vec![device(DEVICE2)],
        ),
    ]
}

#[test]
fn invalid_pool_is_ok_if_devices_can_be_allocated_from_other() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: duplicate_pool_and_one_good(),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL2, DEVICE2, false)],
        )]),
        ..Default::default()
    }
    .run("invalid-pool-is-ok-if-devices-can-be-allocated-from-other");
}

#[test]
fn invalid_pool_is_error_if_no_other_device_can_be_allocated() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: duplicate_pool_and_one_good(),
        allocated: vec![id(DRIVER_A, POOL2, DEVICE2)],
        expect: Expect::FailedOnNode("invalid resource pools were encountered"),
        ..Default::default()
    }
    .run("invalid-pool-is-error-if-no-other-device-can-be-allocated");
}

#[test]
fn no_allocation_from_incomplete_pools() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![device(DEVICE1)],
        )],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("no-allocation-from-incomplete-pools");
}

fn four_devices(slices: Vec<ResourceSlice>, name: &str) {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 5)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices,
        expect: Expect::NoFit,
        invocations: Some(16),
        ..Default::default()
    }
    .run(name);
}

#[test]
fn check_combinations_within_single_request_single_pool_single_slice() {
    four_devices(
        vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                device(DEVICE1),
                device(DEVICE2),
                device(DEVICE3),
                device("device-4"),
            ],
        )],
        "check-combinations-within-single-request-single-pool-single-slice",
    );
}

#[test]
fn check_combinations_within_single_request_single_pool_multiple_slices() {
    four_devices(
        vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE3), device("device-4")],
            ),
        ],
        "check-combinations-within-single-request-single-pool-multiple-slices",
    );
}

#[test]
fn check_combinations_within_single_request_multiple_pools_multiple_slices() {
    four_devices(
        vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE1)],
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE2)],
            ),
            slice(
                SLICE3,
                Sel::Node(NODE1),
                pool(POOL2),
                DRIVER_A,
                vec![device(DEVICE3), device("device-4")],
            ),
        ],
        "check-combinations-within-single-request-multiple-pools-multiple-slices",
    );
}

#[test]
fn check_combinations_within_single_request_many_pools() {
    four_devices(
        vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![device(DEVICE1)],
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                pool(POOL2),
                DRIVER_A,
                vec![device(DEVICE2)],
            ),
            slice(
                SLICE3,
                Sel::Node(NODE1),
                pool(POOL3),
                DRIVER_A,
                vec![device(DEVICE3)],
            ),
            slice(
                SLICE4,
                Sel::Node(NODE1),
                pool(POOL4),
                DRIVER_A,
                vec![device("device-4")],
            ),
        ],
        "check-combinations-within-single-request-many-pools",
    );
}

fn type_is(value: &str) -> k8s_openapi::api::resource::v1::DeviceSelector {
    cel(&format!(
        r#"device.attributes["{DRIVER_A}"].type == "{value}""#
    ))
}

fn typed(name: &str, t: &str) -> Dev {
    device(name).attrs(&[("type", string_attr(t))])
}

#[test]
fn check_combinations_with_backtracking() {
    Case {
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                request(REQ1, CLASS_A, 2),
                request_with(REQ2, CLASS_A, 1, vec![type_is("X")]),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                typed(DEVICE1, "X"),
                typed(DEVICE2, "Y"),
                typed(DEVICE3, "Y"),
            ],
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ1, DRIVER_A, POOL1, DEVICE2, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE3, false),
                res(REQ2, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )]),
        invocations: Some(12),
        ..Default::default()
    }
    .run("check-combinations-with-backtracking");
}

#[test]
fn check_combinations_with_backtracking_across_slices_and_pools() {
    Case {
        features: Features {
            device_binding_and_status: true,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                request(REQ1, CLASS_A, 2),
                request_with(REQ2, CLASS_A, 1, vec![type_is("X")]),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![typed(DEVICE1, "X")],
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![typed(DEVICE2, "Y")],
            ),
            // The binding condition puts pool-2 after pool-1 in the search.
            slice(
                SLICE3,
                Sel::Node(NODE1),
                pool(POOL2),
                DRIVER_A,
                vec![typed(DEVICE3, "Y").binding_conditions(&["IsPrepare"], &[])],
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ1, DRIVER_A, POOL1, DEVICE2, false),
                res_binding(REQ1, DRIVER_A, POOL2, DEVICE3, &["IsPrepare"], &[]),
                res(REQ2, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )]),
        invocations: Some(12),
        ..Default::default()
    }
    .run("check-combinations-with-backtracking-across-slices-and-pools");
}

#[test]
fn check_combinations_with_prioritized_list() {
    Case {
        features: Features {
            prioritized_list: true,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                prioritized(
                    REQ1,
                    vec![
                        sub_request_with(SUB_REQ0, CLASS_A, 3, type_is("Y")),
                        sub_request(SUB_REQ1, CLASS_A, 2),
                    ],
                ),
                prioritized(
                    REQ2,
                    vec![
                        sub_request(SUB_REQ0, CLASS_A, 2),
                        sub_request_with(SUB_REQ1, CLASS_A, 1, type_is("X")),
                    ],
                ),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                typed(DEVICE1, "X"),
                typed(DEVICE2, "Y"),
                typed(DEVICE3, "Y"),
            ],
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false),
                res(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, false),
                res(REQ2_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )]),
        invocations: Some(26),
        ..Default::default()
    }
    .run("check-combinations-with-prioritized-list");
}
