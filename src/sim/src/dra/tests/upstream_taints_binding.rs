//! Upstream cases: device taints and tolerations, binding conditions.

use super::harness::*;

fn taints() -> Features {
    Features {
        device_taints: true,
        ..Default::default()
    }
}

fn binding() -> Features {
    Features {
        device_binding_and_status: true,
        ..Default::default()
    }
}

fn slice1(devices: Vec<Dev>) -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    vec![slice(
        SLICE1,
        Sel::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
        devices,
    )]
}

#[test]
fn tainted_two_devices() {
    Case {
        features: taints(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1).taints(&[taint_no_schedule()]),
            device(DEVICE2).taints(&[taint_no_execute()]),
        ]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("tainted-two-devices");
}

#[test]
fn tainted_one_device_two_taints() {
    Case {
        features: taints(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1).taints(&[taint_no_schedule(), taint_no_execute()]),
        ]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("tainted-one-device-two-taints");
}

#[test]
fn tainted_two_devices_tolerated() {
    Case {
        features: taints(),
        claims: vec![with_tolerations(
            claim_with_request(CLAIM0, REQ0, CLASS_A),
            &[toleration_no_execute()],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1).taints(&[taint_no_schedule()]),
            device(DEVICE2).taints(&[taint_no_execute()]),
        ]),
        // Only the second device's taints are tolerated.
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res_tolerating(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE2,
                vec![toleration_no_execute()],
            )],
        )]),
        ..Default::default()
    }
    .run("tainted-two-devices-tolerated");
}

#[test]
fn tainted_two_devices_prioritized_list_tolerated() {
    let mut tolerating = sub_request(SUB_REQ1, CLASS_A, 1);
    tolerating.tolerations = Some(vec![toleration_no_execute()]);
    Case {
        features: Features {
            device_taints: true,
            prioritized_list: true,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![prioritized(
                REQ0,
                vec![sub_request(SUB_REQ0, CLASS_A, 1), tolerating],
            )],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1).taints(&[taint_no_schedule()]),
            device(DEVICE2).taints(&[taint_no_execute()]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res_tolerating(
                REQ0_SUB_REQ1,
                DRIVER_A,
                POOL1,
                DEVICE2,
                vec![toleration_no_execute()],
            )],
        )]),
        ..Default::default()
    }
    .run("tainted-two-devices-prioritized-list-tolerated");
}

#[test]
fn tainted_no_effect() {
    Case {
        features: taints(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![device(DEVICE1).taints(&[taint_none()])]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("tainted-no-effect");
}

#[test]
fn tainted_one_device_two_taints_both_tolerated() {
    Case {
        features: taints(),
        claims: vec![with_tolerations(
            claim_with_request(CLAIM0, REQ0, CLASS_A),
            &[toleration_no_schedule(), toleration_no_execute()],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1).taints(&[taint_no_schedule(), taint_no_execute()]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res_tolerating(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE1,
                vec![toleration_no_schedule(), toleration_no_execute()],
            )],
        )]),
        ..Default::default()
    }
    .run("tainted-one-device-two-taints-both-tolerated");
}

#[test]
fn tainted_disabled() {
    Case {
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1).taints(&[taint_no_schedule(), taint_no_execute()]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("tainted-disabled");
}

fn b_then_a() -> Vec<k8s_openapi::api::resource::v1::ResourceClaim> {
    vec![claim(
        CLAIM0,
        vec![],
        vec![prioritized(
            REQ0,
            vec![
                sub_request(SUB_REQ0, CLASS_B, 1),
                sub_request(SUB_REQ1, CLASS_A, 1),
            ],
        )],
    )]
}

#[test]
fn tainted_prioritized_list() {
    Case {
        features: Features {
            device_taints: true,
            prioritized_list: true,
            ..Default::default()
        },
        claims: b_then_a(),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: slice1(vec![device(DEVICE1).taints(&[taint_no_schedule()])]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("tainted-prioritized-list");
}

#[test]
fn tainted_prioritized_list_disabled() {
    Case {
        features: Features {
            prioritized_list: true,
            ..Default::default()
        },
        claims: b_then_a(),
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: slice1(vec![device(DEVICE1).taints(&[taint_no_schedule()])]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0_SUB_REQ1, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("tainted-prioritized-list-disabled");
}

#[test]
fn tainted_admin_access() {
    Case {
        features: Features {
            device_taints: true,
            admin_access: true,
            ..Default::default()
        },
        claims: vec![edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
            e.admin_access = Some(true)
        })],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![device(DEVICE1).taints(&[taint_no_schedule()])]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("tainted-admin-access");
}

#[test]
fn tainted_admin_access_disabled() {
    Case {
        features: Features {
            admin_access: true,
            ..Default::default()
        },
        claims: vec![edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
            e.admin_access = Some(true)
        })],
        allocated: vec![id(DRIVER_A, POOL1, DEVICE1), id(DRIVER_A, POOL1, DEVICE2)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![device(DEVICE1).taints(&[taint_no_schedule()])]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, true)],
        )]),
        ..Default::default()
    }
    .run("tainted-admin-access-disabled");
}

#[test]
fn tainted_all_devices_single() {
    Case {
        features: taints(),
        claims: vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![device(DEVICE1).taints(&[taint_no_schedule()])]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("tainted-all-devices-single");
}

#[test]
fn tainted_all_devices_single_disabled() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![device(DEVICE1).taints(&[taint_no_schedule()])]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("tainted-all-devices-single-disabled");
}

#[test]
fn device_binding_conditions() {
    Case {
        features: binding(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1).binding_conditions(&["IsPrepare"], &["BindingFailed"]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res_binding(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE1,
                &["IsPrepare"],
                &["BindingFailed"],
            )],
        )]),
        ..Default::default()
    }
    .run("device-binding-conditions");
}

#[test]
fn binding_conditions_multiple_devices() {
    Case {
        features: binding(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 2), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1).binding_conditions(&["IsPrepare"], &["BindingFailed"]),
            device(DEVICE2).binding_conditions(&["IsPrepare2"], &["BindingFailed2"]),
            device(DEVICE3).binding_conditions(&["IsPrepare3"], &["BindingFailed3"]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_binding(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
                res_binding(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE2,
                    &["IsPrepare2"],
                    &["BindingFailed2"],
                ),
                res_binding(
                    REQ1,
                    DRIVER_A,
                    POOL1,
                    DEVICE3,
                    &["IsPrepare3"],
                    &["BindingFailed3"],
                ),
            ],
        )]),
        ..Default::default()
    }
    .run("binding-conditions-multiple-devices");
}

#[test]
fn binding_conditions_with_and_without() {
    Case {
        features: binding(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1),
            device(DEVICE2).binding_conditions(&["IsPrepare"], &["BindingFailed"]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res_binding(
                    REQ1,
                    DRIVER_A,
                    POOL1,
                    DEVICE2,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
            ],
        )]),
        ..Default::default()
    }
    .run("binding-conditions-with-and-without");
}

#[test]
fn binding_conditions_without_feature_gate() {
    Case {
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 1)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: slice1(vec![
            device(DEVICE1).binding_conditions(&["IsPrepare"], &["BindingFailed"]),
        ]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("binding-conditions-without-feature-gate");
}

#[test]
fn node_restriction() {
    Case {
        features: binding(),
        claims: vec![claim_with_request(CLAIM0, REQ0, CLASS_A)],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice(
            SLICE1,
            Sel::Selector(label_selector(PLANET_KEY, &["earth"])),
            pool(POOL1),
            DRIVER_A,
            vec![device(DEVICE1).binds_to_node(true)],
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("node-restriction");
}

fn partitionable_binding() -> Features {
    Features {
        partitionable_devices: true,
        device_binding_and_status: true,
        ..Default::default()
    }
}

fn memory_counters(set: &str, gi: &str) -> Vec<k8s_openapi::api::resource::v1::CounterSet> {
    vec![counter_set(set, &[("memory", gi)])]
}

#[test]
fn partitionable_devices_with_binding_conditions() {
    Case {
        features: partitionable_binding(),
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
                        .consumes(COUNTER_SET1, &[("memory", "4Gi")], true)
                        .binding_conditions(&["IsPrepare"], &["BindingFailed"]),
                ],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                memory_counters(COUNTER_SET1, "8Gi"),
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res_binding(
                REQ0,
                DRIVER_A,
                POOL1,
                DEVICE1,
                &["IsPrepare"],
                &["BindingFailed"],
            )],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-with-binding-conditions");
}

#[test]
fn partitionable_devices_with_binding_conditions_multiple() {
    Case {
        features: partitionable_binding(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![
                    device(DEVICE1)
                        .consumes(COUNTER_SET1, &[("memory", "4Gi")], true)
                        .binding_conditions(&["IsPrepare"], &["BindingFailed"]),
                    device(DEVICE2)
                        .consumes(COUNTER_SET1, &[("memory", "4Gi")], true)
                        .binding_conditions(&["IsPrepare2"], &["BindingFailed2"]),
                ],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                memory_counters(COUNTER_SET1, "8Gi"),
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_binding(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
                res_binding(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE2,
                    &["IsPrepare2"],
                    &["BindingFailed2"],
                ),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-with-binding-conditions-multiple");
}

#[test]
fn partitionable_devices_with_binding_conditions_some_devices_no_conditions() {
    Case {
        features: partitionable_binding(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 3)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![
                    device(DEVICE1)
                        .consumes(COUNTER_SET1, &[("memory", "2Gi")], true)
                        .binding_conditions(&["IsPrepare"], &["BindingFailed"]),
                    device(DEVICE2).consumes(COUNTER_SET1, &[("memory", "2Gi")], true),
                    device(DEVICE3)
                        .consumes(COUNTER_SET1, &[("memory", "4Gi")], true)
                        .binding_conditions(&["IsReady"], &["BindingTimeout"]),
                ],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                memory_counters(COUNTER_SET1, "8Gi"),
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_binding(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
                res_binding(REQ0, DRIVER_A, POOL1, DEVICE2, &[], &[]),
                res_binding(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE3,
                    &["IsReady"],
                    &["BindingTimeout"],
                ),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-with-binding-conditions-some-devices-no-conditions");
}

#[test]
fn partitionable_devices_with_binding_conditions_multi_slices() {
    Case {
        features: partitionable_binding(),
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE4,
                Sel::Node(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                vec![
                    device(DEVICE1)
                        .consumes(COUNTER_SET1, &[("memory", "4Gi")], true)
                        .binding_conditions(&["IsPrepare"], &["BindingFailed"]),
                ],
            ),
            counter_slice(
                SLICE3,
                Sel::Node(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                memory_counters(COUNTER_SET1, "8Gi"),
            ),
            slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                vec![device(DEVICE2).consumes(COUNTER_SET2, &[("memory", "4Gi")], true)],
            ),
            counter_slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 4),
                DRIVER_A,
                memory_counters(COUNTER_SET2, "8Gi"),
            ),
        ],
        // Slices are searched in name order: slice-2's device comes first.
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_binding(REQ0, DRIVER_A, POOL1, DEVICE2, &[], &[]),
                res_binding(
                    REQ0,
                    DRIVER_A,
                    POOL1,
                    DEVICE1,
                    &["IsPrepare"],
                    &["BindingFailed"],
                ),
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-with-binding-conditions-multi-slices");
}

fn key1_taint() -> k8s_openapi::api::resource::v1::DeviceTaint {
    taint("key1", "value1", "NoSchedule")
}

#[test]
fn partitionable_devices_with_binding_conditions_and_taints() {
    Case {
        features: Features {
            partitionable_devices: true,
            device_binding_and_status: true,
            device_taints: true,
            ..Default::default()
        },
        claims: vec![claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)])],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                vec![
                    device(DEVICE1)
                        .consumes(COUNTER_SET1, &[("memory", "4Gi")], true)
                        .binding_conditions(&["IsPrepare"], &["BindingFailed"])
                        .taints(&[key1_taint()]),
                    device(DEVICE2).consumes(COUNTER_SET1, &[("memory", "4Gi")], true),
                ],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                pool(POOL1),
                DRIVER_A,
                memory_counters(COUNTER_SET1, "8Gi"),
            ),
        ],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("partitionable-devices-with-binding-conditions-and-taints");
}

#[test]
fn partitionable_devices_with_binding_conditions_and_taints_tolerated() {
    let key1 = toleration("Exists", "key1", "", "NoSchedule");
    Case {
        features: Features {
            partitionable_devices: true,
            device_binding_and_status: true,
            device_taints: true,
            ..Default::default()
        },
        claims: vec![with_tolerations(
            claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)]),
            std::slice::from_ref(&key1),
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![
                    device(DEVICE1)
                        .consumes(COUNTER_SET1, &[("memory", "4Gi")], true)
                        .binding_conditions(&["IsPrepare"], &["BindingFailed"])
                        .taints(&[key1_taint()]),
                    device(DEVICE2).consumes(COUNTER_SET1, &[("memory", "4Gi")], true),
                ],
            ),
            counter_slice(
                SLICE2,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                memory_counters(COUNTER_SET1, "8Gi"),
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                {
                    let mut r = res_binding(
                        REQ0,
                        DRIVER_A,
                        POOL1,
                        DEVICE1,
                        &["IsPrepare"],
                        &["BindingFailed"],
                    );
                    r.tolerations = Some(vec![key1.clone()]);
                    r
                },
                {
                    let mut r = res_binding(REQ0, DRIVER_A, POOL1, DEVICE2, &[], &[]);
                    r.tolerations = Some(vec![key1.clone()]);
                    r
                },
            ],
        )]),
        ..Default::default()
    }
    .run("partitionable-devices-with-binding-conditions-and-taints-tolerated");
}
