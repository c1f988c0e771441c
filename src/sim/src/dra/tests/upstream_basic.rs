//! Upstream cases: simple allocation, pools and slices, All mode, admin
//! access, network-attached devices, configuration, errors.

use super::harness::*;

fn basic_slices() -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    vec![slice_with_one_device(
        SLICE1,
        Sel::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
    )]
}

#[test]
fn empty() {
    Case {
        expect: Expect::Results(vec![]),
        ..Default::default()
    }
    .run("empty");
}

#[test]
fn simple() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("simple");
}

#[test]
fn other_node() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_B),
            slice_with_one_device(SLICE2, Sel::Node(NODE2), pool(POOL2), DRIVER_A),
        ],
        node: node(NODE2, REGION2),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE2)),
            vec![res(REQ0, DRIVER_A, POOL2, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("other-node");
}

fn small_and_large_requests() -> Vec<k8s_openapi::api::resource::v1::DeviceRequest> {
    vec![
        request_with(REQ0, CLASS_A, 1, vec![memory_at_least(DRIVER_A, "1Gi")]),
        request_with(REQ1, CLASS_A, 1, vec![memory_at_least(DRIVER_A, "2Gi")]),
    ]
}

#[test]
fn small_and_large() {
    Case {
        claims: vec![claim(CLAIM0, vec![], small_and_large_requests())],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                device(DEVICE1).capacity(&[("memory", "1Gi")]),
                device(DEVICE2).capacity(&[("memory", "2Gi")]),
            ],
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )]),
        ..Default::default()
    }
    .run("small-and-large");
}

#[test]
fn small_and_large_backtrack_requests() {
    Case {
        claims: vec![claim(CLAIM0, vec![], small_and_large_requests())],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                device(DEVICE2).capacity(&[("memory", "2Gi")]),
                device(DEVICE1).capacity(&[("memory", "1Gi")]),
            ],
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )]),
        ..Default::default()
    }
    .run("small-and-large-backtrack-requests");
}

#[test]
fn small_and_large_backtrack_claims() {
    Case {
        claims: vec![
            claim(
                CLAIM0,
                vec![],
                vec![request_with(
                    REQ0,
                    CLASS_A,
                    1,
                    vec![memory_at_least(DRIVER_A, "1Gi")],
                )],
            ),
            claim(
                CLAIM1,
                vec![],
                vec![request_with(
                    REQ1,
                    CLASS_A,
                    1,
                    vec![memory_at_least(DRIVER_A, "2Gi")],
                )],
            ),
        ],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![
                device(DEVICE2).capacity(&[("memory", "2Gi")]),
                device(DEVICE1).capacity(&[("memory", "1Gi")]),
            ],
        )],
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ1, DRIVER_A, POOL1, DEVICE2, false)],
            ),
        ]),
        ..Default::default()
    }
    .run("small-and-large-backtrack-claims");
}

#[test]
fn devices_split_across_different_slices() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A),
            slice_with_one_device(SLICE2, Sel::Node(NODE1), pool(POOL2), DRIVER_A),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ0, DRIVER_A, POOL2, DEVICE1, false),
            ],
        )]),
        ..Default::default()
    }
    .run("devices-split-across-different-slices");
}

#[test]
fn obsolete_slice() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                "slice-1-obsolete",
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![device(DEVICE1)],
            ),
            // The newer generation makes the other slice obsolete.
            slice(
                "slice-1-obsolete",
                Sel::Node(NODE1),
                PoolSpec(POOL1, 2, 2),
                DRIVER_A,
                vec![device(DEVICE2)],
            ),
        ],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("obsolete-slice");
}

#[test]
fn duplicate_slice() {
    let mut a = slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A);
    a.spec.pool.resource_slice_count = 2;
    let mut b = a.clone();
    b.metadata.name = Some(format!("{SLICE1}-2"));
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![a, b],
        expect: Expect::FailedOnNode("invalid resource pools were encountered"),
        ..Default::default()
    }
    .run("duplicate-slice");
}

#[test]
fn no_slices() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("no-slices");
}

#[test]
fn not_enough_suitable_devices() {
    Case {
        claims: vec![
            claim_with_request(CLAIM0, REQ0, CLASS_A),
            claim_with_request(CLAIM0, REQ1, CLASS_A),
        ],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("not-enough-suitable-devices");
}

#[test]
fn no_classes() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        slices: basic_slices(),
        expect: Expect::Error("could not retrieve device class class-a"),
        ..Default::default()
    }
    .run("no-classes");
}

#[test]
fn unknown_class() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, "unknown-class")],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Error("could not retrieve device class unknown-class"),
        ..Default::default()
    }
    .run("unknown-class");
}

#[test]
fn empty_class() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, "")],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Error(
            "claim claim-0, request req-0: missing device class name (unsupported request type?)",
        ),
        ..Default::default()
    }
    .run("empty-class");
}

#[test]
fn no_claims_to_allocate() {
    Case {
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Results(vec![]),
        ..Default::default()
    }
    .run("no-claims-to-allocate");
}

#[test]
fn all_devices_single() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("all-devices-single");
}

#[test]
fn all_devices_many() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A),
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL2), DRIVER_A),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ0, DRIVER_A, POOL2, DEVICE1, false),
            ],
        )]),
        ..Default::default()
    }
    .run("all-devices-many");
}

#[test]
fn all_devices_of_the_incomplete_pool() {
    let mut s = slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A);
    s.spec.pool.resource_slice_count += 1;
    let mut r = all_request(REQ0, CLASS_A);
    if let Some(e) = r.exactly.as_mut() {
        e.count = Some(1);
    }
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![r])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![s],
        expect: Expect::Error(
            "claim claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated",
        ),
        ..Default::default()
    }
    .run("all-devices-of-the-incomplete-pool");
}

fn two_drivers() -> (
    Vec<k8s_openapi::api::resource::v1::DeviceClass>,
    Vec<k8s_openapi::api::resource::v1::ResourceSlice>,
) {
    (
        vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        vec![
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A),
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_B),
        ],
    )
}

#[test]
fn all_devices_plus_another() {
    let (classes, slices) = two_drivers();
    Case {
        claims: vec![
            claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
            claim(CLAIM1, vec![], vec![request(REQ0, CLASS_B, 1)]),
        ],
        classes,
        slices,
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_B, POOL1, DEVICE1, false)],
            ),
        ]),
        ..Default::default()
    }
    .run("all-devices-plus-another");
}

#[test]
fn all_devices_plus_another_reversed() {
    let (classes, slices) = two_drivers();
    Case {
        claims: vec![
            claim(CLAIM1, vec![], vec![request(REQ0, CLASS_B, 1)]),
            claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
        ],
        classes,
        slices,
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_B, POOL1, DEVICE1, false)],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
        ]),
        ..Default::default()
    }
    .run("all-devices-plus-another-reversed");
}

#[test]
fn all_devices_many_plus_another() {
    Case {
        claims: vec![
            claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
            claim(CLAIM1, vec![], vec![request(REQ0, CLASS_B, 1)]),
        ],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            ),
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_B),
        ],
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![
                    res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                    res(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                ],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_B, POOL1, DEVICE1, false)],
            ),
        ]),
        ..Default::default()
    }
    .run("all-devices-many-plus-another");
}

#[test]
fn all_devices_many_plus_another_reversed() {
    Case {
        claims: vec![
            claim(CLAIM1, vec![], vec![request(REQ0, CLASS_B, 1)]),
            claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
        ],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            ),
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_B),
        ],
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_B, POOL1, DEVICE1, false)],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![
                    res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                    res(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                ],
            ),
        ]),
        ..Default::default()
    }
    .run("all-devices-many-plus-another-reversed");
}

#[test]
fn all_devices_no_slices() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("all-devices-no-slices");
}

#[test]
fn all_devices_no_solution() {
    Case {
        claims: vec![
            claim(CLAIM1, vec![], vec![request(REQ0, CLASS_A, 1)]),
            claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
        ],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("all-devices-no-solution");
}

#[test]
fn all_devices_no_solution_reversed() {
    Case {
        claims: vec![
            claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)]),
            claim(CLAIM1, vec![], vec![request(REQ0, CLASS_A, 1)]),
        ],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("all-devices-no-solution-reversed");
}

#[test]
fn all_devices_slice_without_devices() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![],
        )],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("all-devices-slice-without-devices");
}

#[test]
fn all_devices_some_allocated() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            vec![device(DEVICE1), device(DEVICE2)],
        )],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("all-devices-some-allocated");
}

fn admin() -> Features {
    Features {
        admin_access: true,
        ..Default::default()
    }
}

fn two_device_slice() -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    vec![slice(
        SLICE1,
        Sel::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
        vec![device(DEVICE1), device(DEVICE2)],
    )]
}

#[test]
fn all_devices_some_allocated_admin_access() {
    let c = edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
        e.admin_access = Some(true);
        e.allocation_mode = Some("All".into());
    });
    Case {
        features: admin(),
        claims: vec![c],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: two_device_slice(),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, true),
                res(REQ0, DRIVER_A, POOL1, DEVICE2, true),
            ],
        )]),
        ..Default::default()
    }
    .run("all-devices-some-allocated-admin-access");
}

#[test]
fn all_devices_some_allocating_admin_access() {
    let mut c = claim(
        CLAIM0,
        vec![],
        vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
    );
    if let Some(requests) = c
        .spec
        .as_mut()
        .and_then(|s| s.devices.as_mut())
        .and_then(|d| d.requests.as_mut())
    {
        requests[0].exactly.as_mut().unwrap().admin_access = Some(true);
        let second = requests[1].exactly.as_mut().unwrap();
        second.admin_access = Some(true);
        second.allocation_mode = Some("All".into());
    }
    Case {
        features: admin(),
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: two_device_slice(),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("all-devices-some-allocating-admin-access");
}

#[test]
fn count_devices_some_allocated_admin_access() {
    let c = edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
        e.admin_access = Some(true);
        e.count = Some(2);
    });
    Case {
        features: admin(),
        claims: vec![c],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: two_device_slice(),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, true),
                res(REQ0, DRIVER_A, POOL1, DEVICE2, true),
            ],
        )]),
        ..Default::default()
    }
    .run("count-devices-some-allocated-admin-access");
}

#[test]
fn separate_claims_share_device_admin_access() {
    let admin_claim = |name| {
        edit_exact(claim_with_request(name, REQ0, CLASS_A), |e| {
            e.admin_access = Some(true)
        })
    };
    Case {
        features: admin(),
        claims: vec![admin_claim(CLAIM0), admin_claim(CLAIM1)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: two_device_slice(),
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
            ),
        ]),
        ..Default::default()
    }
    .run("separate-claims-share-device-admin-access");
}

#[test]
fn admin_access_claims_device_allocating_for_non_admin_access() {
    let admin_claim = edit_exact(claim_with_request(CLAIM1, REQ0, CLASS_A), |e| {
        e.admin_access = Some(true)
    });
    Case {
        features: admin(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A), admin_claim],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: two_device_slice(),
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
            ),
        ]),
        ..Default::default()
    }
    .run("admin-access-claims-device-allocating-for-non-admin-access");
}

#[test]
fn network_attached_device() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Sel::Selector(label_selector(REGION_KEY, &[REGION1])),
            pool(POOL1),
            DRIVER_A,
        )],
        expect: Expect::Results(vec![alloc(
            Some(label_selector(REGION_KEY, &[REGION1])),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("network-attached-device");
}

#[test]
fn unsuccessful_allocation_network_attached_device() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Sel::Selector(label_selector(REGION_KEY, &[REGION1])),
            pool(POOL1),
            DRIVER_A,
        )],
        node: node(NODE2, REGION2),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("unsuccessful-allocation-network-attached-device");
}

#[test]
fn many_network_attached_devices() {
    use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
    let requirement = |key: &str, value: &str| NodeSelectorRequirement {
        key: key.into(),
        operator: "In".into(),
        values: Some(vec![value.into()]),
    };
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 4)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_one_device(
                SLICE1,
                Sel::Selector(label_selector(REGION_KEY, &[REGION1])),
                pool(POOL1),
                DRIVER_A,
            ),
            slice_with_one_device(SLICE1, Sel::All, pool(POOL2), DRIVER_A),
            slice_with_one_device(
                SLICE1,
                Sel::Selector(label_selector(PLANET_KEY, &["earth"])),
                pool(POOL3),
                DRIVER_A,
            ),
            slice_with_one_device(
                SLICE1,
                Sel::Selector(local_selector(NODE1)),
                pool(POOL4),
                DRIVER_A,
            ),
        ],
        // A union of the individual selectors.
        expect: Expect::Results(vec![alloc(
            Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![
                        requirement(REGION_KEY, REGION1),
                        requirement(PLANET_KEY, "earth"),
                    ]),
                    match_fields: Some(vec![requirement(FIELD_NAME_KEY, NODE1)]),
                }],
            }),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ0, DRIVER_A, POOL2, DEVICE1, false),
                res(REQ0, DRIVER_A, POOL3, DEVICE1, false),
                res(REQ0, DRIVER_A, POOL4, DEVICE1, false),
            ],
        )]),
        ..Default::default()
    }
    .run("many-network-attached-devices");
}

#[test]
fn local_and_network_attached_devices() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice_with_one_device(
                SLICE1,
                Sel::Selector(label_selector(REGION_KEY, &[REGION1])),
                pool(POOL1),
                DRIVER_A,
            ),
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL2), DRIVER_A),
        ],
        // Once there is any node-local device, the selector is for that node.
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ0, DRIVER_A, POOL2, DEVICE1, false),
            ],
        )]),
        ..Default::default()
    }
    .run("local-and-network-attached-devices");
}

#[test]
fn several_different_drivers() {
    Case {
        claims: vec![
            claim_with_request(CLAIM0, REQ0, CLASS_A),
            claim_with_request(CLAIM0, REQ0, CLASS_B),
        ],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![device(DEVICE1), device(DEVICE2)],
            ),
            slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_B),
        ],
        expect: Expect::Results(vec![
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            ),
            alloc(
                Some(local_selector(NODE1)),
                vec![res(REQ0, DRIVER_B, POOL1, DEVICE1, false)],
            ),
        ]),
        ..Default::default()
    }
    .run("several-different-drivers");
}

#[test]
fn already_allocated_devices() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("already-allocated-devices");
}

#[test]
fn admin_access_disabled() {
    Case {
        claims: vec![edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
            e.admin_access = Some(true)
        })],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Error(
            "claim claim-0, request req-0: admin access is requested, but the feature is disabled",
        ),
        ..Default::default()
    }
    .run("admin-access-disabled");
}

#[test]
fn admin_access_enabled() {
    Case {
        features: admin(),
        claims: vec![edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
            e.admin_access = Some(true)
        })],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
        )]),
        ..Default::default()
    }
    .run("admin-access-enabled");
}

#[test]
fn with_class_device_config() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class_with_config(CLASS_A, DRIVER_A, "classAttribute")],
        slices: basic_slices(),
        expect: Expect::Results(vec![alloc_with_configs(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            vec![config(
                "FromClass",
                &[],
                device_configuration(DRIVER_A, "classAttribute"),
            )],
        )]),
        ..Default::default()
    }
    .run("with-class-device-config");
}

#[test]
fn with_class_device_config_with_multiple_request_and_configs() {
    Case {
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
                request(REQ2, CLASS_B, 1),
            ],
        )],
        classes: vec![
            class_with_config(CLASS_A, DRIVER_A, "classAttribute-A"),
            class_with_config(CLASS_B, DRIVER_B, "classAttribute-B"),
        ],
        slices: vec![
            slice_with_multiple_devices(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A, 2),
            slice_with_one_device(SLICE2, Sel::Node(NODE1), pool(POOL1), DRIVER_B),
        ],
        expect: Expect::Results(vec![alloc_with_configs(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE0, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ2, DRIVER_B, POOL1, DEVICE1, false),
            ],
            vec![
                config(
                    "FromClass",
                    &[REQ0, REQ1],
                    device_configuration(DRIVER_A, "classAttribute-A"),
                ),
                config(
                    "FromClass",
                    &[REQ2],
                    device_configuration(DRIVER_B, "classAttribute-B"),
                ),
            ],
        )]),
        ..Default::default()
    }
    .run("with-class-device-config-with-multiple-request-and-configs");
}

#[test]
fn with_claim_config_for_two_requests() {
    let c = with_configs(
        claim(
            CLAIM0,
            vec![],
            vec![
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
                request(REQ2, CLASS_A, 1),
            ],
        ),
        vec![claim_config(
            &[REQ0, REQ1],
            device_configuration(DRIVER_A, "deviceAttribute"),
        )],
    );
    Case {
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_multiple_devices(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            3,
        )],
        expect: Expect::Results(vec![alloc_with_configs(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE0, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ2, DRIVER_A, POOL1, "device-2", false),
            ],
            vec![config(
                "FromClaim",
                &[REQ0, REQ1],
                device_configuration(DRIVER_A, "deviceAttribute"),
            )],
        )]),
        ..Default::default()
    }
    .run("with-claim-config-for-two-requests");
}

#[test]
fn claim_with_device_config() {
    let c = with_configs(
        claim_with_request(CLAIM0, REQ0, CLASS_A),
        vec![claim_config(
            &[],
            device_configuration(DRIVER_A, "deviceAttribute"),
        )],
    );
    Case {
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Results(vec![alloc_with_configs(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
            vec![config(
                "FromClaim",
                &[],
                device_configuration(DRIVER_A, "deviceAttribute"),
            )],
        )]),
        ..Default::default()
    }
    .run("claim-with-device-config");
}

#[test]
fn unknown_selector() {
    let c = edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
        e.selectors = Some(vec![Default::default()]);
    });
    Case {
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Error("CEL expression empty (unsupported selector type?)"),
        ..Default::default()
    }
    .run("unknown-selector");
}

#[test]
fn unknown_allocation_mode() {
    let c = edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
        e.allocation_mode = Some("future-mode".into());
    });
    Case {
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Error("unsupported count mode future-mode"),
        ..Default::default()
    }
    .run("unknown-allocation-mode");
}

#[test]
fn unknown_constraint() {
    let mut c = claim_with_request(CLAIM0, REQ0, CLASS_A);
    if let Some(d) = c.spec.as_mut().and_then(|s| s.devices.as_mut()) {
        d.constraints = Some(vec![Default::default()]);
    }
    Case {
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Error("empty constraint (unsupported constraint type?)"),
        ..Default::default()
    }
    .run("unknown-constraint");
}

#[test]
fn invalid_cel_one_device() {
    let c = edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
        e.selectors = Some(vec![cel("noSuchVar")])
    });
    Case {
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Error("undeclared reference"),
        ..Default::default()
    }
    .run("invalid-CEL-one-device");
}

#[test]
fn invalid_cel_one_device_class() {
    let mut c = class(CLASS_A, DRIVER_A);
    c.spec.as_mut().unwrap().selectors = Some(vec![cel("noSuchVar")]);
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![c],
        slices: basic_slices(),
        expect: Expect::Error("undeclared reference"),
        ..Default::default()
    }
    .run("invalid-CEL-one-device-class");
}

#[test]
fn invalid_cel_all_devices() {
    let c = edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
        e.selectors = Some(vec![cel("noSuchVar")]);
        e.allocation_mode = Some("All".into());
    });
    Case {
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: basic_slices(),
        expect: Expect::Error("undeclared reference"),
        ..Default::default()
    }
    .run("invalid-CEL-all-devices");
}

#[test]
fn too_many_devices_single_request() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 500)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        expect: Expect::Error("exceeds the claim limit"),
        ..Default::default()
    }
    .run("too-many-devices-single-request");
}

#[test]
fn many_devices_okay() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 32)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("many-devices-okay");
}

#[test]
fn too_many_devices_total() {
    Case {
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 32), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_multiple_devices(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            33,
        )],
        expect: Expect::Error("exceeds the claim limit"),
        ..Default::default()
    }
    .run("too-many-devices-total");
}

#[test]
fn max_number_devices() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 32)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_multiple_devices(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
            32,
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            multiple_results(REQ0, DRIVER_A, POOL1, 32, 0),
        )]),
        ..Default::default()
    }
    .run("max-number-devices");
}

fn skipping_slice() -> k8s_openapi::api::resource::v1::ResourceSlice {
    let mut s = slice_with_one_device(SLICE1, Sel::Node(NODE1), pool(POOL1), DRIVER_A);
    s.spec.skip_node_operations = Some(vec!["*".into()]);
    s
}

fn optional_node_operations_on() -> Features {
    Features {
        optional_node_operations: true,
        ..Default::default()
    }
}

#[test]
fn optional_node_operations() {
    // `nodeWithDRAOptionalNodeOperations`: the node declares the feature.
    let mut n = node(NODE1, REGION1);
    n.status = Some(k8s_openapi::api::core::v1::NodeStatus {
        declared_features: Some(vec!["DRAOptionalNodeOperations".into()]),
        ..Default::default()
    });
    Case {
        features: optional_node_operations_on(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![skipping_slice()],
        node: n,
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                k8s_openapi::api::resource::v1::DeviceRequestAllocationResult {
                    skip_node_operations: Some(vec!["*".into()]),
                    ..res(REQ0, DRIVER_A, POOL1, DEVICE1, false)
                },
            ],
        )]),
        ..Default::default()
    }
    .run("optional-node-operations");
}

#[test]
fn optional_node_operations_missing_feature() {
    Case {
        features: optional_node_operations_on(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![skipping_slice()],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("optional-node-operations-missing-feature");
}

// Not an upstream case: our reason for the case above.
#[test]
fn reasons_name_the_missing_node_feature() {
    let case = Case {
        features: optional_node_operations_on(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![skipping_slice()],
        ..Default::default()
    };
    let Ok(crate::dra::AllocateOutcome::Unschedulable { reasons }) = case.outcome().0 else {
        panic!("expected Unschedulable");
    };
    let reasons: Vec<String> = reasons.iter().map(ToString::to_string).collect();
    assert!(
        reasons.iter().any(|r| r
            .contains("node node-1 does not declare the DRAOptionalNodeOperations feature")
            && r.contains("(slice-1)")),
        "{reasons:?}"
    );
}
