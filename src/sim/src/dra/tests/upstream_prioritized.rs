//! Upstream cases: `firstAvailable` (prioritized list) requests.

use super::harness::*;

fn prioritized_list() -> Features {
    Features {
        prioritized_list: true,
        ..Default::default()
    }
}

fn one_claim(
    requests: Vec<k8s_openapi::api::resource::v1::DeviceRequest>,
) -> Vec<k8s_openapi::api::resource::v1::ResourceClaim> {
    vec![claim(CLAIM0, vec![], requests)]
}

fn generation_is(value: &str) -> k8s_openapi::api::resource::v1::DeviceSelector {
    cel(&format!(
        r#"device.attributes["{DRIVER_A}"].generation == "{value}""#
    ))
}

#[test]
fn prioritized_list_first_unavailable() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(
            REQ0,
            vec![
                sub_request(SUB_REQ0, CLASS_B, 1),
                sub_request(SUB_REQ1, CLASS_A, 1),
            ],
        )]),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-first-unavailable");
}

#[test]
fn prioritized_list_non_available() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(
            REQ0,
            vec![
                sub_request(SUB_REQ0, CLASS_B, 2),
                sub_request(SUB_REQ1, CLASS_A, 2),
            ],
        )]),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A),
            slice_with_one_device(SLICE2, Sel::Node(NODE1), pool(POOL2), DRIVER_B),
        ],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("prioritized-list-non-available");
}

#[test]
fn prioritized_list_device_config() {
    let c = with_configs(
        claim(
            CLAIM0,
            vec![],
            vec![prioritized(
                REQ0,
                vec![
                    sub_request(SUB_REQ0, CLASS_A, 1),
                    sub_request(SUB_REQ1, CLASS_B, 2),
                ],
            )],
        ),
        vec![
            claim_config(&[REQ0_SUB_REQ0], device_configuration(DRIVER_A, "foo")),
            claim_config(&[REQ0_SUB_REQ1], device_configuration(DRIVER_B, "bar")),
        ],
    );
    Case {
        features: prioritized_list(),
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_B,
            vec![device(DEVICE1), device(DEVICE2)],
        )],
        expect: Expect::Results(vec![alloc_with_configs(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE1, false),
                res(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE2, false),
            ],
            vec![config(
                "FromClaim",
                &[],
                device_configuration(DRIVER_B, "bar"),
            )],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-device-config");
}

#[test]
fn prioritized_list_class_config() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(
            REQ0,
            vec![
                sub_request(SUB_REQ0, CLASS_A, 2),
                sub_request(SUB_REQ1, CLASS_B, 2),
            ],
        )]),
        classes: vec![
            class_with_config(CLASS_A, DRIVER_A, "foo"),
            class_with_config(CLASS_B, DRIVER_B, "bar"),
        ],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_B,
                vec![device(DEVICE1), device(DEVICE2)],
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                pool(POOL2),
                DRIVER_A,
                vec![device(DEVICE3)],
            ),
        ],
        expect: Expect::Results(vec![alloc_with_configs(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE1, false),
                res(REQ0_SUB_REQ1, DRIVER_B, POOL1, DEVICE2, false),
            ],
            vec![config(
                "FromClass",
                &[],
                device_configuration(DRIVER_B, "bar"),
            )],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-class-config");
}

#[test]
fn claim_config_scoped_to_subrequests_of_one_request() {
    let c = with_configs(
        claim(
            CLAIM0,
            vec![],
            vec![
                prioritized(
                    REQ0,
                    vec![
                        sub_request(SUB_REQ0, CLASS_A, 1),
                        sub_request(SUB_REQ1, CLASS_B, 1),
                    ],
                ),
                request(REQ1, CLASS_A, 1),
            ],
        ),
        vec![claim_config(
            &[REQ0_SUB_REQ0, REQ0_SUB_REQ1],
            device_configuration(DRIVER_A, "scoped"),
        )],
    );
    Case {
        features: prioritized_list(),
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![slice_with_multiple_devices(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            2,
        )],
        expect: Expect::Results(vec![alloc_with_configs(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0_SUB_REQ0, DRIVER_A, POOL1, DEVICE0, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
            vec![config(
                "FromClaim",
                &[REQ0_SUB_REQ0, REQ0_SUB_REQ1],
                device_configuration(DRIVER_A, "scoped"),
            )],
        )]),
        ..Default::default()
    }
    .run("claim-config-scoped-to-subrequests-of-one-request");
}

#[test]
fn claim_config_covering_all_requests_is_cleared() {
    let c = with_configs(
        claim(
            CLAIM0,
            vec![],
            vec![
                prioritized(
                    REQ0,
                    vec![
                        sub_request(SUB_REQ0, CLASS_A, 1),
                        sub_request(SUB_REQ1, CLASS_B, 1),
                    ],
                ),
                request(REQ1, CLASS_A, 1),
            ],
        ),
        vec![claim_config(
            &[REQ0_SUB_REQ0, REQ1],
            device_configuration(DRIVER_A, "all"),
        )],
    );
    Case {
        features: prioritized_list(),
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![slice_with_multiple_devices(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            2,
        )],
        expect: Expect::Results(vec![alloc_with_configs(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0_SUB_REQ0, DRIVER_A, POOL1, DEVICE0, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
            vec![config(
                "FromClaim",
                &[],
                device_configuration(DRIVER_A, "all"),
            )],
        )]),
        ..Default::default()
    }
    .run("claim-config-covering-all-requests-is-cleared");
}

#[test]
fn prioritized_list_subrequests_with_expressions() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![
            request_with(REQ0, CLASS_A, 1, vec![memory_at_least(DRIVER_A, "1Gi")]),
            prioritized(
                REQ1,
                vec![
                    sub_request_with(SUB_REQ0, CLASS_A, 1, memory_at_least(DRIVER_A, "4Gi")),
                    sub_request_with(SUB_REQ1, CLASS_A, 2, memory_at_least(DRIVER_A, "2Gi")),
                ],
            ),
        ]),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                device(DEVICE1).capacity(&[("memory", "2Gi")]),
                device(DEVICE2).capacity(&[("memory", "2Gi")]),
                device(DEVICE3).capacity(&[("memory", "1Gi")]),
            ],
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE3, false),
                res(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-subrequests-with-expressions");
}

fn version_attribute() -> String {
    format!("{DRIVER_A}/driverVersion")
}

fn memory_version_slices(
    second_pool: Vec<Dev>,
) -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    vec![
        slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                device(DEVICE1)
                    .capacity(&[("memory", "8Gi")])
                    .attrs(&[("driverVersion", version_attr("1.0.0"))]),
            ],
        ),
        slice(SLICE2, Sel::Node(NODE1), pool(POOL2), DRIVER_A, second_pool),
    ]
}

fn memory_version_requests() -> Vec<k8s_openapi::api::resource::v1::DeviceRequest> {
    vec![
        request_with(REQ0, CLASS_A, 1, vec![memory_at_least(DRIVER_A, "8Gi")]),
        prioritized(
            REQ1,
            vec![
                sub_request_with(SUB_REQ0, CLASS_A, 1, memory_at_least(DRIVER_A, "2Gi")),
                sub_request_with(SUB_REQ1, CLASS_A, 1, memory_at_least(DRIVER_A, "1Gi")),
            ],
        ),
    ]
}

#[test]
fn prioritized_list_subrequests_with_constraints_ref_parent_request() {
    Case {
        features: prioritized_list(),
        claims: vec![claim(
            CLAIM0,
            vec![match_attribute(&[REQ0, REQ1], &version_attribute())],
            memory_version_requests(),
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: memory_version_slices(vec![
            device(DEVICE2)
                .capacity(&[("memory", "2Gi")])
                .attrs(&[("driverVersion", version_attr("2.0.0"))]),
            device(DEVICE3)
                .capacity(&[("memory", "1Gi")])
                .attrs(&[("driverVersion", version_attr("1.0.0"))]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1_SUB_REQ1, DRIVER_A, POOL2, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-subrequests-with-constraints-ref-parent-request");
}

#[test]
fn prioritized_list_subrequests_with_constraints_ref_sub_request() {
    Case {
        features: prioritized_list(),
        claims: vec![claim(
            CLAIM0,
            vec![match_attribute(
                &[REQ0, REQ1_SUB_REQ0],
                &version_attribute(),
            )],
            memory_version_requests(),
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: memory_version_slices(vec![
            device(DEVICE2)
                .capacity(&[("memory", "2Gi")])
                .attrs(&[("driverVersion", version_attr("2.0.0"))]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, false),
            ],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-subrequests-with-constraints-ref-sub-request");
}

#[test]
fn prioritized_list_subrequests_with_allocation_mode_all() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(
            REQ0,
            vec![
                all_sub_request(SUB_REQ0, CLASS_A),
                sub_request(SUB_REQ1, CLASS_A, 1),
            ],
        )]),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![device(DEVICE1), device(DEVICE2)],
        )],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false)],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-subrequests-with-allocation-mode-all");
}

#[test]
fn prioritized_list_allocation_mode_all_multiple_requests() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![
            request(REQ0, CLASS_A, 1),
            prioritized(
                REQ1,
                vec![
                    all_sub_request(SUB_REQ0, CLASS_A),
                    sub_request(SUB_REQ1, CLASS_A, 1),
                ],
            ),
        ]),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![device(DEVICE1), device(DEVICE2)],
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-allocation-mode-all-multiple-requests");
}

#[test]
fn prioritized_list_disabled() {
    Case {
        claims: one_claim(vec![prioritized(REQ0, vec![sub_request(SUB_REQ0, CLASS_A, 1)])]),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A)],
        expect: Expect::Error("claim claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled"),
        ..Default::default()
    }
    .run("prioritized-list-disabled");
}

fn eight_and_four_gi() -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    vec![
        slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![device(DEVICE1).capacity(&[("memory", "8Gi")])],
        ),
        slice(
            SLICE2,
            Sel::Node(NODE1),
            pool(POOL2),
            DRIVER_A,
            vec![device(DEVICE2).capacity(&[("memory", "4Gi")])],
        ),
    ]
}

#[test]
fn prioritized_list_multi_request() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![
            request_with(REQ1, CLASS_A, 1, vec![memory_at_least(DRIVER_A, "8Gi")]),
            prioritized(
                REQ0,
                vec![
                    sub_request_with(SUB_REQ0, CLASS_A, 1, memory_at_least(DRIVER_A, "8Gi")),
                    sub_request_with(SUB_REQ1, CLASS_A, 1, memory_at_least(DRIVER_A, "4Gi")),
                ],
            ),
        ]),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: eight_and_four_gi(),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ1, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, false),
            ],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-multi-request");
}

#[test]
fn prioritized_list_with_backtracking() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![
            prioritized(
                REQ0,
                vec![
                    sub_request_with(SUB_REQ0, CLASS_A, 1, memory_at_least(DRIVER_A, "8Gi")),
                    sub_request_with(SUB_REQ1, CLASS_A, 1, memory_at_least(DRIVER_A, "4Gi")),
                ],
            ),
            request_with(REQ1, CLASS_A, 1, vec![memory_at_least(DRIVER_A, "8Gi")]),
        ]),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: eight_and_four_gi(),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE2, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE1, false),
            ],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-with-backtracking");
}

#[test]
fn prioritized_list_too_many_in_first_subrequest() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(
            REQ0,
            vec![
                sub_request(SUB_REQ0, CLASS_B, 500),
                sub_request(SUB_REQ1, CLASS_A, 1),
            ],
        )]),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-too-many-in-first-subrequest");
}

#[test]
fn all_devices_slice_without_devices_prioritized_list() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(
            REQ0,
            vec![
                all_sub_request(SUB_REQ0, CLASS_A),
                sub_request(SUB_REQ1, CLASS_B, 1),
            ],
        )]),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![
            slice(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A, vec![]),
            slice_with_one_device(SLICE2, Sel::Node(NODE1), pool(POOL2), DRIVER_B),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("all-devices-slice-without-devices-prioritized-list");
}

#[test]
fn all_devices_no_slices_prioritized_list() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(
            REQ0,
            vec![
                all_sub_request(SUB_REQ0, CLASS_A),
                sub_request(SUB_REQ1, CLASS_B, 1),
            ],
        )]),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![slice_with_one_device(
            SLICE2,
            Sel::Node(NODE1),
            pool(POOL2),
            DRIVER_B,
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("all-devices-no-slices-prioritized-list");
}

#[test]
fn all_devices_some_allocated_prioritized_list() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(
            REQ0,
            vec![
                all_sub_request(SUB_REQ0, CLASS_A),
                sub_request(SUB_REQ1, CLASS_B, 1),
            ],
        )]),
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            ),
            slice_with_one_device(SLICE2, Sel::Node(NODE1), pool(POOL2), DRIVER_B),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_B, POOL2, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("all-devices-some-allocated-prioritized-list");
}

#[test]
fn prioritized_list_allocation_mode_all() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(
            REQ0,
            vec![
                all_sub_request(SUB_REQ0, CLASS_A),
                sub_request(SUB_REQ1, CLASS_A, 1),
            ],
        )]),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![device(DEVICE1), device(DEVICE2)],
        )],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE2)],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-allocation-mode-all");
}

fn generation_subrequests() -> Vec<k8s_openapi::api::resource::v1::DeviceRequest> {
    let mut v6 = all_sub_request(SUB_REQ0, CLASS_A);
    v6.selectors = Some(vec![generation_is("v6")]);
    let mut v5 = all_sub_request(SUB_REQ1, CLASS_A);
    v5.selectors = Some(vec![generation_is("v5")]);
    vec![prioritized(REQ0, vec![v6, v5])]
}

#[test]
fn prioritized_list_allocation_mode_all_with_selectors() {
    Case {
        features: prioritized_list(),
        claims: one_claim(generation_subrequests()),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![device(DEVICE1).attrs(&[("generation", string_attr("v5"))])],
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-allocation-mode-all-with-selectors");
}

#[test]
fn prioritized_list_allocation_mode_all_with_selectors_multiple_pools() {
    Case {
        features: prioritized_list(),
        claims: one_claim(generation_subrequests()),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![device(DEVICE1).attrs(&[("generation", string_attr("v5"))])],
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                pool(POOL2),
                DRIVER_A,
                vec![device(DEVICE1).attrs(&[("generation", string_attr("v5"))])],
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ0_SUB_REQ1, DRIVER_A, POOL2, DEVICE1, false),
            ],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-allocation-mode-all-with-selectors-multiple-pools");
}

#[test]
fn prioritized_list_allocation_mode_all_with_selectors_multiple_pools_across_nodes() {
    Case {
        features: prioritized_list(),
        claims: one_claim(generation_subrequests()),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![device(DEVICE1).attrs(&[("generation", string_attr("v5"))])],
            ),
            slice(
                SLICE2,
                Sel::Node(NODE2),
                pool(POOL2),
                DRIVER_A,
                vec![
                    device(DEVICE1).attrs(&[("generation", string_attr("v5"))]),
                    device(DEVICE2).attrs(&[("generation", string_attr("v6"))]),
                ],
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes");
}

#[test]
fn prioritized_list_allocation_mode_all_with_selectors_deviceclass_subset() {
    let mut c = class(CLASS_A, DRIVER_A);
    c.spec.as_mut().unwrap().selectors = Some(vec![cel(&format!(
        r#"device.driver == "{DRIVER_A}" && device.attributes["{DRIVER_A}"].selected"#
    ))]);
    Case {
        features: prioritized_list(),
        claims: one_claim(generation_subrequests()),
        classes: vec![c],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                device(DEVICE1).attrs(&[
                    ("generation", string_attr("v6")),
                    ("selected", bool_attr(false)),
                ]),
                device(DEVICE2).attrs(&[
                    ("generation", string_attr("v5")),
                    ("selected", bool_attr(false)),
                ]),
                device(DEVICE3).attrs(&[
                    ("generation", string_attr("v5")),
                    ("selected", bool_attr(true)),
                ]),
            ],
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE3, false)],
        )]),
        ..Default::default()
    }
    .run("prioritized-list-allocation-mode-all-with-selectors-deviceclass-subset");
}

#[test]
fn prioritized_list_max_allocation_limit_request() {
    let subs = || {
        vec![
            sub_request(SUB_REQ0, CLASS_A, 32),
            sub_request(SUB_REQ1, CLASS_A, 16),
        ]
    };
    let mut results = multiple_results(REQ0_SUB_REQ1, DRIVER_A, POOL1, 16, 0);
    results.extend(multiple_results(REQ1_SUB_REQ1, DRIVER_A, POOL1, 16, 16));
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![prioritized(REQ0, subs()), prioritized(REQ1, subs())]),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_multiple_devices(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            64,
        )],
        expect: Expect::Results(vec![alloc(Some(local_selector(NODE1)), results)]),
        invocations: Some(75),
        ..Default::default()
    }
    .run("prioritized-list-max-allocation-limit-request");
}

#[test]
fn prioritized_list_max_allocation_allocation_mode_all() {
    Case {
        features: prioritized_list(),
        claims: one_claim(vec![
            prioritized(
                REQ0,
                vec![
                    all_sub_request(SUB_REQ0, CLASS_A),
                    sub_request(SUB_REQ1, CLASS_A, 2),
                ],
            ),
            request(REQ1, CLASS_B, 2),
        ]),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![
            slice_with_multiple_devices(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A, 31),
            slice_with_multiple_devices(SLICE2, Sel::Node(NODE1), pool(POOL2), DRIVER_B, 2),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE0, false),
                res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1, DRIVER_B, POOL2, DEVICE0, false),
                res(REQ1, DRIVER_B, POOL2, DEVICE1, false),
            ],
        )]),
        invocations: Some(42),
        ..Default::default()
    }
    .run("prioritized-list-max-allocation-allocation-mode-all");
}
