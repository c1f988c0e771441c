//! Upstream cases: consumable capacity and multi-allocatable devices.

use super::harness::*;

fn consumable() -> Features {
    Features {
        consumable_capacity: true,
        ..Default::default()
    }
}

fn one_slice(devices: Vec<Dev>) -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    vec![slice(
        SLICE1,
        Sel::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
        devices,
    )]
}

fn capacity_request(count: i64, q: Option<&str>) -> k8s_openapi::api::resource::v1::DeviceRequest {
    with_capacity_request(request(REQ0, CLASS_A, count), q)
}

fn multi_class() -> Vec<k8s_openapi::api::resource::v1::DeviceClass> {
    vec![class_with_allow_multiple_allocations(
        CLASS_A, DRIVER_A, true,
    )]
}

fn shared_results(device: &str, consumed: &[(&str, &str)]) -> Expect {
    Expect::Results(vec![
        alloc(
            Some(local_selector(NODE1)),
            vec![res_shared(REQ0, DRIVER_A, POOL1, device, consumed)],
        ),
        alloc(
            Some(local_selector(NODE1)),
            vec![res_shared(REQ0, DRIVER_A, POOL1, device, consumed)],
        ),
    ])
}

fn single_result(device: &str, consumed: &[(&str, &str)]) -> Expect {
    Expect::Results(vec![alloc(
        Some(local_selector(NODE1)),
        vec![res_shared(REQ0, DRIVER_A, POOL1, device, consumed)],
    )])
}

#[test]
fn consumable_capacity_disabled_feature() {
    Case {
        features: Features {
            device_binding_and_status: true,
            ..Default::default()
        },
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("1"))])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A)],
        expect: Expect::Error("claim claim-0, request req-0: has capacity requests, but the DRAConsumableCapacity feature is disabled"),
        ..Default::default()
    }
    .run("consumable-capacity-disabled-feature");
}

#[test]
fn consumable_capacity_disabled_feature_with_prioritized_list() {
    Case {
        features: Features {
            prioritized_list: true,
            device_binding_and_status: true,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![prioritized(
                REQ0,
                vec![
                    sub_with_capacity_request(sub_request(SUB_REQ0, CLASS_A, 1), Some("1")),
                    sub_with_capacity_request(sub_request(SUB_REQ1, CLASS_A, 1), Some("1")),
                ],
            )],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A)],
        expect: Expect::Error("claim claim-0, subrequest subReq-0: has capacity requests, but the DRAConsumableCapacity feature is disabled"),
        ..Default::default()
    }
    .run("consumable-capacity-disabled-feature-with-prioritized-list");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_missing_capacity_request() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("1"))])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![device(DEVICE1).capacity(&[(CAPACITY1, "1")]).multi()]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-missing-capacity-request");
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_with_missing_capacity_request()
{
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![with_capacity_request(all_request(REQ0, CLASS_A), Some("1"))])],
        classes: multi_class(),
        slices: one_slice(vec![device(DEVICE1).capacity(&[(CAPACITY1, "1")]).multi()]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-allocation-mode-all-with-missing-capacity-request");
}

fn two_claims(q: Option<&str>) -> Vec<k8s_openapi::api::resource::v1::ResourceClaim> {
    let r = |q: Option<&str>| match q {
        Some(q) => capacity_request(1, Some(q)),
        None => request(REQ0, CLASS_A, 1),
    };
    vec![
        claim(CLAIM0, vec![], vec![r(q)]),
        claim(CLAIM1, vec![], vec![r(q)]),
    ]
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_capacity_without_capacity_request() {
    Case {
        features: consumable(),
        claims: two_claims(None),
        classes: multi_class(),
        slices: one_slice(vec![device(DEVICE1).multi()]),
        // Both share the device; nothing is consumed since no capacity is defined.
        expect: shared_results(DEVICE1, &[]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request");
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_policy_without_capacity_request() {
    Case {
        features: consumable(),
        claims: two_claims(None),
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).capacity(&[(CAPACITY0, "1")]).multi(),
            device(DEVICE2).capacity(&[(CAPACITY0, "1")]).multi(),
        ]),
        // Each gets the full capacity of a different device.
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res_shared(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &[(CAPACITY0, "1")],
                )],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res_shared(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE2,
                    &[(CAPACITY0, "1")],
                )],
            ),
        ]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request");
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_policy_without_capacity_request_block() {
    Case {
        features: consumable(),
        claims: two_claims(None),
        classes: multi_class(),
        slices: one_slice(vec![device(DEVICE1).capacity(&[(CAPACITY0, "2")]).multi()]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request-block");
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_policy_with_capacity_request() {
    Case {
        features: consumable(),
        claims: two_claims(Some("1")),
        classes: multi_class(),
        slices: one_slice(vec![device(DEVICE1).capacity(&[(CAPACITY0, "2")]).multi()]),
        expect: shared_results(DEVICE1, &[(CAPACITY0, "1")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_policy_without_capacity_request() {
    Case {
        features: consumable(),
        claims: two_claims(None),
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "4")]),
        ]),
        // Both requests get the policy's default (2).
        expect: shared_results(DEVICE1, &[(CAPACITY0, "2")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_zero_request_policy() {
    Case {
        features: consumable(),
        claims: two_claims(None),
        classes: multi_class(),
        slices: one_slice(vec![device(DEVICE1).multi().policy_values(
            "0",
            &[(CAPACITY0, "1")],
            &[],
        )]),
        expect: shared_results(DEVICE1, &[(CAPACITY0, "0")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-zero-request-policy");
}

#[test]
fn consumable_capacity_multi_allocatable_device_violates_zero_request_policy() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("1"))])],
        classes: multi_class(),
        slices: one_slice(vec![device(DEVICE1).multi().policy_values(
            "0",
            &[(CAPACITY0, "1")],
            &[],
        )]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-violates-zero-request-policy");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_range_policy_with_capacity_request() {
    Case {
        features: consumable(),
        claims: two_claims(Some("1")),
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "4")]),
        ]),
        // Rounded up to the range minimum (2).
        expect: shared_results(DEVICE1, &[(CAPACITY0, "2")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-range-policy-with-capacity-request");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_range_policy_step() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("3"))])],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "4")]),
        ]),
        // Rounded up by the step: 3 → 2+2 = 4.
        expect: single_result(DEVICE1, &[(CAPACITY0, "4")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-range-policy-step");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_valid_values_policy() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("2"))])],
        classes: multi_class(),
        slices: one_slice(vec![device(DEVICE1).multi().policy_values(
            "1",
            &[(CAPACITY0, "4")],
            &["2"],
        )]),
        expect: single_result(DEVICE1, &[(CAPACITY0, "2")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-valid-values-policy");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_valid_values_policy_round_up() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("2"))])],
        classes: multi_class(),
        slices: one_slice(vec![device(DEVICE1).multi().policy_values(
            "1",
            &[(CAPACITY0, "3")],
            &["3"],
        )]),
        expect: single_result(DEVICE1, &[(CAPACITY0, "3")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-valid-values-policy-round-up");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_exceeded_consumable_capacity_request() {
    Case {
        features: consumable(),
        claims: vec![
            claim(CLAIM0, vec![], vec![capacity_request(1, Some("1"))]),
            claim(CLAIM1, vec![], vec![capacity_request(1, Some("2"))]),
        ],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "2")]),
        ]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_request_over_max_sharing_policy() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("6"))])],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "10")]),
        ]),
        // The policy's maximum is 4: no allocation although 6 < 10.
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_allocated_capacity_use_remaining() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("2"))])],
        allocated_shares: vec![(
            id(DRIVER_A, POOL1, DEVICE1),
            "existing-share",
            vec![(CAPACITY0, "2")],
        )],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "4")]),
        ]),
        expect: single_result(DEVICE1, &[(CAPACITY0, "2")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_allocated_capacity_next_device() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("2"))])],
        allocated_shares: vec![(
            id(DRIVER_A, POOL1, DEVICE1),
            "existing-share",
            vec![(CAPACITY0, "2")],
        )],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "2")]),
            device(DEVICE2).multi().policy_range(&[(CAPACITY0, "2")]),
        ]),
        expect: single_result(DEVICE2, &[(CAPACITY0, "2")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device");
}

#[test]
fn consumable_capacity_with_multi_allocatable_device_backtrack() {
    let string_attribute = format!("{DRIVER_A}/stringAttribute");
    Case {
        features: consumable(),
        claims: vec![
            claim(
                CLAIM0,
                vec![match_attribute(&[], &string_attribute)],
                vec![
                    with_capacity_request(request(REQ0, CLASS_A, 1), Some("2")),
                    with_capacity_request(request(REQ1, CLASS_A, 1), Some("2")),
                ],
            ),
            claim(CLAIM1, vec![], vec![capacity_request(1, Some("2"))]),
        ],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            device(DEVICE2)
                .attrs(&[("stringAttribute", string_attr("stringAttributeValue1"))])
                .multi()
                .policy_range(&[(CAPACITY0, "2")]),
            device(DEVICE1)
                .attrs(&[("stringAttribute", string_attr("stringAttributeValue2"))])
                .multi()
                .policy_range(&[(CAPACITY0, "4")]),
        ]),
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![
                    res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[(CAPACITY0, "2")]),
                    res_shared(REQ1, DRIVER_A, POOL1, DEVICE1, &[(CAPACITY0, "2")]),
                ],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res_shared(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE2,
                    &[(CAPACITY0, "2")],
                )],
            ),
        ]),
        ..Default::default()
    }
    .run("consumable-capacity-with-multi-allocatable-device-backtrack");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_subrequest() {
    Case {
        features: Features {
            consumable_capacity: true,
            prioritized_list: true,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![prioritized(
                REQ0,
                vec![
                    sub_with_capacity_request(sub_request(SUB_REQ0, CLASS_A, 1), Some("4")),
                    sub_with_capacity_request(sub_request(SUB_REQ1, CLASS_A, 1), Some("2")),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ],
            )],
        )],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "2")]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res_shared(
                REQ0_SUB_REQ1,
                DRIVER_A,
                POOL1,
                DEVICE1,
                &[(CAPACITY0, "2")],
            )],
        )]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-subrequest");
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_no_available_consumable_capacity() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("2"))])],
        allocated_shares: vec![(
            id(DRIVER_A, POOL1, DEVICE1),
            "existing-share",
            vec![(CAPACITY0, "2")],
        )],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "2")]),
        ]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity");
}

fn all_with_capacity(q: &str) -> k8s_openapi::api::resource::v1::DeviceRequest {
    with_capacity_request(all_request(REQ0, CLASS_A), Some(q))
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_filter_out_no_capacity() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![all_with_capacity("2")])],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).capacity(&[(CAPACITY0, "2")]).multi(),
            device(DEVICE2).multi(),
        ]),
        expect: single_result(DEVICE1, &[(CAPACITY0, "2")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-no-capacity");
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_filter_out_insufficient_capacity()
 {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![all_with_capacity("2")])],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).capacity(&[(CAPACITY0, "2")]).multi(),
            device(DEVICE2).capacity(&[(CAPACITY0, "1")]).multi(),
        ]),
        expect: single_result(DEVICE1, &[(CAPACITY0, "2")]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity");
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_allocating_sufficient() {
    Case {
        features: consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                capacity_request(1, Some("1")),
                with_capacity_request(all_request(REQ1, CLASS_A), Some("1")),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            device(DEVICE1).capacity(&[(CAPACITY0, "2")]).multi(),
            device(DEVICE2).capacity(&[(CAPACITY0, "1")]).multi(),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[(CAPACITY0, "1")]),
                res_shared(REQ1, DRIVER_A, POOL1, DEVICE1, &[(CAPACITY0, "1")]),
                res_shared(REQ1, DRIVER_A, POOL1, DEVICE2, &[(CAPACITY0, "1")]),
            ],
        )]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient");
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_in_use_sufficient() {
    Case {
        features: consumable(),
        allocated_shares: vec![(
            id(DRIVER_A, POOL1, DEVICE1),
            "existing-share",
            vec![(CAPACITY0, "1")],
        )],
        claims: vec![claim(CLAIM0, vec![], vec![all_with_capacity("1")])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            device(DEVICE1).capacity(&[(CAPACITY0, "2")]).multi(),
            device(DEVICE2).capacity(&[(CAPACITY0, "1")]).multi(),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[(CAPACITY0, "1")]),
                res_shared(REQ0, DRIVER_A, POOL1, DEVICE2, &[(CAPACITY0, "1")]),
            ],
        )]),
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-sufficient");
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_allocating_insufficient() {
    Case {
        features: consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                capacity_request(1, Some("1")),
                with_capacity_request(all_request(REQ1, CLASS_A), Some("1")),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            device(DEVICE1).capacity(&[(CAPACITY0, "1")]).multi(),
            device(DEVICE2).capacity(&[(CAPACITY0, "1")]).multi(),
        ]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run(
        "consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-insufficient",
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_in_use_insufficient() {
    Case {
        features: consumable(),
        allocated_shares: vec![(
            id(DRIVER_A, POOL1, DEVICE1),
            "existing-share",
            vec![(CAPACITY0, "1")],
        )],
        claims: vec![claim(CLAIM0, vec![], vec![all_with_capacity("1")])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            device(DEVICE1).capacity(&[(CAPACITY0, "1")]).multi(),
            device(DEVICE2).capacity(&[(CAPACITY0, "1")]).multi(),
        ]),
        // kubernetes#140769: device1 still matches (its static capacity fits),
        // so it stays in the All set; its used-up capacity makes All fail
        // instead of shrinking the set to device2.
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient");
}

#[test]
fn consumable_capacity_dedicated_device_with_consumable_capacity_request() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("1"))])],
        classes: vec![class_with_allow_multiple_allocations(
            CLASS_A, DRIVER_A, false,
        )],
        slices: one_slice(vec![device(DEVICE1).capacity(&[(CAPACITY0, "1")])]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("consumable-capacity-dedicated-device-with-consumable-capacity-request");
}

#[test]
fn consumable_capacity_dedicated_device_with_multiple_consumable_capacity_request() {
    Case {
        features: consumable(),
        claims: two_claims(Some("1")),
        classes: vec![class_with_allow_multiple_allocations(
            CLASS_A, DRIVER_A, false,
        )],
        slices: one_slice(vec![device(DEVICE1).policy_range(&[(CAPACITY0, "2")])]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("consumable-capacity-dedicated-device-with-multiple-consumable-capacity-request");
}

#[test]
fn allow_multiple_allocations_exclude_multi_allocatable_device_by_class_selector() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("1"))])],
        classes: vec![class_with_allow_multiple_allocations(
            CLASS_A, DRIVER_A, false,
        )],
        slices: one_slice(vec![device(DEVICE1).capacity(&[(CAPACITY0, "1")]).multi()]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector");
}

#[test]
fn allow_multiple_allocations_not_allocate_multi_allocatable_device_which_already_dedicated() {
    Case {
        features: consumable(),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("1"))])],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1).multi().policy_range(&[(CAPACITY0, "2")]),
        ]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run(
        "allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated",
    );
}

#[test]
fn allow_multiple_allocations_not_allocate_dedicated_device_which_change_from_multi_allocatable() {
    Case {
        features: consumable(),
        claims: vec![claim(CLAIM0, vec![], vec![capacity_request(1, Some("1"))])],
        allocated_shares: vec![(id(DRIVER_A, POOL1, DEVICE1), "existing-share", vec![(CAPACITY0, "1")])],
        classes: multi_class(),
        slices: one_slice(vec![device(DEVICE1).policy_range(&[(CAPACITY0, "2")])]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("allow-multiple-allocations-not-allocate-dedicated-device-which-change-from-multi-allocatable");
}

#[test]
fn allow_multiple_allocations_with_partitionable_device() {
    Case {
        features: Features {
            prioritized_list: true,
            partitionable_devices: true,
            consumable_capacity: true,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                request(REQ0, CLASS_A, 1),
                prioritized(
                    REQ1,
                    vec![
                        sub_request_with(SUB_REQ0, CLASS_A, 1, memory_at_least(DRIVER_A, "6Gi")),
                        sub_request_with(SUB_REQ1, CLASS_A, 1, memory_at_least(DRIVER_A, "4Gi")),
                    ],
                ),
            ],
        )],
        classes: multi_class(),
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![
                    device(DEVICE1)
                        .consumes(COUNTER_SET1, &[("memory", "4Gi")], true)
                        .multi(),
                    device(DEVICE2)
                        .consumes(COUNTER_SET1, &[("memory", "6Gi")], true)
                        .multi(),
                    device(DEVICE3)
                        .consumes(COUNTER_SET1, &[("memory", "4Gi")], true)
                        .multi(),
                ],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[("memory", "8Gi")])],
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[("memory", "4Gi")]),
                res_shared(
                    REQ1_SUB_REQ1,
                    DRIVER_A,
                    POOL1,
                    DEVICE3,
                    &[("memory", "4Gi")],
                ),
            ],
        )]),
        ..Default::default()
    }
    .run("allow-multiple-allocations-with-partitionable-device");
}

#[test]
fn allow_multiple_allocations_with_shared_device_counter_cross_cycle() {
    let dev = |d: &str, mode: &str| {
        device(d)
            .attrs(&[("mode", string_attr(mode))])
            .consumes(COUNTER_SET1, &[(CAPACITY0, "1")], true)
            .multi()
    };
    Case {
        features: Features {
            partitionable_devices: true,
            consumable_capacity: true,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![{
                let mut r = capacity_request(1, Some("1"));
                r.exactly.as_mut().unwrap().selectors = Some(vec![cel(&format!(
                    r#"device.attributes["{DRIVER_A}"].mode == "b""#
                ))]);
                r
            }],
        )],
        allocated_shares: vec![(
            id(DRIVER_A, POOL1, DEVICE1),
            FIXED_SHARE_ID,
            vec![(CAPACITY0, "1")],
        )],
        classes: multi_class(),
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![dev(DEVICE1, "a"), dev(DEVICE2, "b")],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[(CAPACITY0, "1")])],
            ),
        ],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("allow-multiple-allocations-with-shared-device-counter-cross-cycle");
}

#[test]
fn consumable_capacity_with_partitionable_device_multiple_capacity_pools() {
    let dev = |d: &str, c0: &str| {
        device(d)
            .consumes(COUNTER_SET1, &[(CAPACITY0, c0)], true)
            .consumes(COUNTER_SET2, &[(CAPACITY1, "4")], true)
            .multi()
            .policy_range(&[(CAPACITY1, "4")])
    };
    let at_least = |n: &str| {
        cel(&format!(
            r#"device.capacity["{DRIVER_A}"]["{CAPACITY0}"].compareTo(quantity("{n}")) >= 0"#
        ))
    };
    Case {
        features: Features {
            prioritized_list: true,
            partitionable_devices: true,
            consumable_capacity: true,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                capacity_request(1, Some("1")),
                with_capacity_request(request(REQ2, CLASS_A, 1), Some("2")),
                prioritized(
                    REQ1,
                    vec![
                        sub_with_capacity_request(
                            sub_request_with(SUB_REQ0, CLASS_A, 1, at_least("4")),
                            Some("1"),
                        ),
                        sub_with_capacity_request(
                            sub_request_with(SUB_REQ1, CLASS_A, 1, at_least("2")),
                            Some("1"),
                        ),
                    ],
                ),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![dev(DEVICE1, "2"), dev(DEVICE2, "4"), dev(DEVICE3, "2")],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![
                    counter_set(COUNTER_SET1, &[(CAPACITY0, "4")]),
                    counter_set(COUNTER_SET2, &[(CAPACITY1, "8")]),
                ],
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_shared(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &[(CAPACITY0, "1"), (CAPACITY1, "2")],
                ),
                res_shared(
                    REQ2,
                    DRIVER_A,
                    POOL1,
                    DEVICE3,
                    &[(CAPACITY0, "2"), (CAPACITY1, "2")],
                ),
                res_shared(
                    REQ1_SUB_REQ1,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &[(CAPACITY0, "1"), (CAPACITY1, "2")],
                ),
            ],
        )]),
        ..Default::default()
    }
    .run("consumable-capacity-with-partitionable-device-multiple-capacity-pools");
}

#[test]
fn consumable_capacity_requests_are_not_modified() {
    let huge = "1000000000000000000000";
    let mut dev = device(DEVICE1).multi();
    dev.0.capacity = Some(
        [(
            CAPACITY0.to_string(),
            k8s_openapi::api::resource::v1::DeviceCapacity {
                value: q("1000000000000000000002"),
                request_policy: Some(k8s_openapi::api::resource::v1::CapacityRequestPolicy {
                    default: Some(q(huge)),
                    valid_range: Some(k8s_openapi::api::resource::v1::CapacityRequestPolicyRange {
                        min: q("2"),
                        ..Default::default()
                    }),
                    valid_values: None,
                }),
            },
        )]
        .into(),
    );
    Case {
        features: consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                capacity_request(1, Some("2")),
                with_capacity_request(request(REQ1, CLASS_A, 1), Some(huge)),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![dev]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[(CAPACITY0, "2")]),
                // Upstream compares quantities by value; "1e21" is the
                // canonical serialization of 10^21 since kubernetes#140459
                // (no SI suffix beyond E: the exponent form keeps the value).
                res_shared(REQ1, DRIVER_A, POOL1, DEVICE1, &[(CAPACITY0, "1e21")]),
            ],
        )]),
        ..Default::default()
    }
    .run("consumable-capacity-requests-are-not-modified");
}

#[test]
fn partitionable_consumable_capacity_shared_device_counter_not_recharged() {
    // device1 already has a persisted share recorded only by its share ID
    // (no consumed capacity); a further share must not pay its counters again
    // (kubernetes#140437).
    Case {
        features: Features {
            partitionable_devices: true,
            consumable_capacity: true,
            ..Default::default()
        },
        allocated_shares: vec![(id(DRIVER_A, POOL1, DEVICE1), FIXED_SHARE_ID, vec![])],
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![
                    device(DEVICE1)
                        .multi()
                        .consumes(COUNTER_SET1, &[("c", "1")], false),
                ],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![counter_set(COUNTER_SET1, &[("c", "1")])],
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[])],
        )]),
        ..Default::default()
    }
    .run("partitionable-consumable-capacity-shared-device-counter-not-recharged");
}

fn fractional_case(name: &str, fractional: bool, request: &str, consumed: &str) {
    Case {
        features: Features {
            consumable_capacity: true,
            fractional_capacity_range: fractional,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![capacity_request(1, Some(request))],
        )],
        classes: multi_class(),
        slices: one_slice(vec![
            device(DEVICE1)
                .multi()
                .policy_range_fractional(&[(CAPACITY0, "1")]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res_shared(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE1,
                &[(CAPACITY0, consumed)],
            )],
        )]),
        ..Default::default()
    }
    .run(name);
}

#[test]
fn consumable_capacity_fractional_range_gate_disabled() {
    // Integer path: Value() of 200m (min, request) and 100m (step) is 1, so
    // the request rounds to 1.
    fractional_case(
        "consumable-capacity-fractional-range-gate-disabled",
        false,
        "200m",
        "1",
    );
}

#[test]
fn consumable_capacity_fractional_range_gate_enabled_round_up() {
    // Milli path: (250m - 200m) / 100m rounds up to one step: 300m.
    fractional_case(
        "consumable-capacity-fractional-range-gate-enabled-round-up",
        true,
        "250m",
        "300m",
    );
}

#[test]
fn consumable_capacity_rejection_rolls_back_constraints() {
    let attr_is = |v: &str| {
        cel(&format!(
            r#"device.attributes["{DRIVER_A}"].stringAttribute == "{v}""#
        ))
    };
    let mut all_cap = all_sub_request(SUB_REQ0, CLASS_A);
    all_cap.selectors = Some(vec![attr_is("cap")]);
    let all_cap = sub_with_capacity_request(all_cap, Some("2"));
    Case {
        features: Features {
            consumable_capacity: true,
            prioritized_list: true,
            ..Default::default()
        },
        claims: vec![
            claim(
                CLAIM0,
                vec![],
                vec![with_capacity_request(
                    request_with(REQ0, CLASS_A, 1, vec![attr_is("cap")]),
                    Some("2"),
                )],
            ),
            claim(
                CLAIM1,
                vec![match_attribute(&[], &format!("{DRIVER_A}/stringAttribute"))],
                vec![prioritized(
                    REQ0,
                    vec![
                        all_cap,
                        sub_request_with(SUB_REQ1, CLASS_A, 1, attr_is("fb")),
                    ],
                )],
            ),
        ],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            device(DEVICE1)
                .capacity(&[(CAPACITY0, "2")])
                .attrs(&[("stringAttribute", string_attr("cap"))])
                .multi(),
            device(DEVICE2).attrs(&[("stringAttribute", string_attr("fb"))]),
        ]),
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res_shared(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &[(CAPACITY0, "2")],
                )],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false)],
            ),
        ]),
        ..Default::default()
    }
    .run("consumable-capacity-rejection-rolls-back-constraints");
}
