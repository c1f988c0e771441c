//! Upstream cases: `matchAttribute` and `distinctAttribute`, scalar and
//! (with `DRAListTypeAttributes`) list-valued.

use super::harness::*;
use k8s_openapi::api::resource::v1::DeviceAttribute;

fn attr(name: &str) -> String {
    format!("{DRIVER_A}/{name}")
}

fn int_attribute() -> String {
    attr("numa")
}
fn version_attribute() -> String {
    attr("driverVersion")
}
fn string_attribute() -> String {
    attr("stringAttribute")
}
fn bool_attribute() -> String {
    attr("boolAttribute")
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

fn two_with(name: &str, a: DeviceAttribute, b: DeviceAttribute) -> Vec<Dev> {
    vec![
        device(DEVICE1).attrs(&[(name, a)]),
        device(DEVICE2).attrs(&[(name, b)]),
    ]
}

fn both(request: &str) -> Expect {
    Expect::Results(vec![alloc(
        Some(local_selector(NODE1)),
        vec![
            res(request, DRIVER_A, POOL1, DEVICE1, false),
            res(request, DRIVER_A, POOL1, DEVICE2, false),
        ],
    )])
}

#[test]
fn with_constraint() {
    let all = |d: &str| {
        device(d).attrs(&[
            ("driverVersion", version_attr("1.0.0")),
            ("numa", int_attr(1)),
            ("stringAttribute", string_attr("stringAttributeValue")),
            ("boolAttribute", bool_attr(true)),
        ])
    };
    Case {
        claims: vec![claim(
            CLAIM0,
            vec![
                match_attribute(&[], &int_attribute()),
                match_attribute(&[], &version_attribute()),
                match_attribute(&[], &string_attribute()),
                match_attribute(&[], &bool_attribute()),
            ],
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![all(DEVICE1), all(DEVICE2)]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )]),
        ..Default::default()
    }
    .run("with-constraint");
}

#[test]
fn with_constraint_non_existent_attribute() {
    let mut c = claim_with_request(CLAIM0, REQ0, CLASS_A);
    c.spec
        .as_mut()
        .unwrap()
        .devices
        .as_mut()
        .unwrap()
        .constraints = Some(vec![match_attribute(&[], &attr("NonExistentAttribute"))]);
    Case {
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
        )],
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("with-constraint-non-existent-attribute");
}

fn mismatch(name: &str, attribute: String, key: &str, a: DeviceAttribute, b: DeviceAttribute) {
    Case {
        claims: vec![claim(
            CLAIM0,
            vec![match_attribute(&[], &attribute)],
            vec![request(REQ0, CLASS_A, 2)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: one_slice(two_with(key, a, b)),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run(name);
}

#[test]
fn with_constraint_not_matching_int_attribute() {
    mismatch(
        "with-constraint-not-matching-int-attribute",
        int_attribute(),
        "numa",
        int_attr(1),
        int_attr(2),
    );
}

#[test]
fn with_constraint_not_matching_string_attribute() {
    mismatch(
        "with-constraint-not-matching-string-attribute",
        string_attribute(),
        "stringAttribute",
        string_attr("stringAttributeValue"),
        string_attr("stringAttributeValue2"),
    );
}

#[test]
fn with_constraint_not_matching_bool_attribute() {
    mismatch(
        "with-constraint-not-matching-bool-attribute",
        bool_attribute(),
        "boolAttribute",
        bool_attr(true),
        bool_attr(false),
    );
}

#[test]
fn with_constraint_not_matching_version_attribute() {
    mismatch(
        "with-constraint-not-matching-version-attribute",
        version_attribute(),
        "driverVersion",
        version_attr("1.0.0"),
        version_attr("2.0.0"),
    );
}

#[test]
fn with_constraint_not_matching_int_attribute_all_devices() {
    let c = edit_exact(
        claim(
            CLAIM0,
            vec![match_attribute(&[], &int_attribute())],
            vec![request(REQ0, CLASS_A, 0)],
        ),
        |e| e.allocation_mode = Some("All".into()),
    );
    Case {
        claims: vec![c],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: one_slice(two_with("numa", int_attr(1), int_attr(2))),
        expect: Expect::Error(
            "claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied",
        ),
        ..Default::default()
    }
    .run("with-constraint-not-matching-int-attribute-all-devices");
}

#[test]
fn with_constraint_for_request() {
    Case {
        claims: vec![claim(
            CLAIM0,
            vec![match_attribute(&[REQ0], &version_attribute())],
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        slices: one_slice(two_with(
            "driverVersion",
            version_attr("1.0.0"),
            version_attr("2.0.0"),
        )),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE2, false),
            ],
        )]),
        ..Default::default()
    }
    .run("with-constraint-for-request");
}

#[test]
fn with_constraint_for_request_retry() {
    let dev = |d: &str, v: &str, s: &str| {
        device(d).attrs(&[
            ("driverVersion", version_attr(v)),
            ("stringAttribute", string_attr(s)),
        ])
    };
    Case {
        claims: vec![claim(
            CLAIM0,
            vec![
                match_attribute(&[REQ0], &version_attribute()),
                match_attribute(&[], &string_attribute()),
            ],
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        // The first device does not satisfy the second constraint: backtrack.
        slices: one_slice(vec![
            dev(DEVICE1, "1.0.0", "a"),
            dev(DEVICE2, "2.0.0", "b"),
            dev(DEVICE3, "3.0.0", "b"),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE2, false),
                res(REQ1, DRIVER_A, POOL1, DEVICE3, false),
            ],
        )]),
        ..Default::default()
    }
    .run("with-constraint-for-request-retry");
}

fn consumable() -> Features {
    Features {
        consumable_capacity: true,
        ..Default::default()
    }
}

#[test]
fn with_distinct_constraints() {
    let dev = |d: &str, v: &str, n: i64, b: bool| {
        device(d)
            .attrs(&[
                ("driverVersion", version_attr(v)),
                ("numa", int_attr(n)),
                ("boolAttribute", bool_attr(b)),
            ])
            .multi()
    };
    Case {
        features: consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![
                distinct_attribute(&[REQ0, REQ1], &bool_attribute()),
                distinct_attribute(&[REQ0, REQ1, REQ2], &version_attribute()),
                distinct_attribute(&[REQ0, REQ1, REQ2, "req-3"], &int_attribute()),
            ],
            vec![
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
                request(REQ2, CLASS_A, 1),
                request("req-3", CLASS_A, 1),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            dev(DEVICE1, "1.0.0", 0, true),
            dev(DEVICE2, "1.0.1", 1, false),
            dev(DEVICE3, "1.0.2", 2, true),
            dev("device-4", "1.0.0", 3, true),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[]),
                res_shared(REQ1, DRIVER_A, POOL1, DEVICE2, &[]),
                res_shared(REQ2, DRIVER_A, POOL1, DEVICE3, &[]),
                res_shared("req-3", DRIVER_A, POOL1, "device-4", &[]),
            ],
        )]),
        ..Default::default()
    }
    .run("with-distinct-constraints");
}

#[test]
fn with_distinct_constraints_attribute_not_set() {
    Case {
        features: consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![distinct_attribute(&[REQ0], &bool_attribute())],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![device(DEVICE1).multi()]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("with-distinct-constraints-attribute-not-set");
}

#[test]
fn with_distinct_constraints_unknown_type_attribute() {
    Case {
        features: consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![distinct_attribute(&[REQ0], &bool_attribute())],
            vec![request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            device(DEVICE1)
                .attrs(&[("boolAttribute", DeviceAttribute::default())])
                .multi(),
        ]),
        expect: Expect::Error("unsupported attribute value"),
        ..Default::default()
    }
    .run("with-distinct-constraints-unknown-type-attribute");
}

#[test]
fn with_distinct_constraints_with_subrequests() {
    let subs = || {
        vec![
            sub_request_with(
                SUB_REQ0,
                CLASS_A,
                1,
                cel(&format!(r#"device.attributes["{DRIVER_A}"].boolAttribute"#)),
            ),
            sub_request(SUB_REQ1, CLASS_A, 1),
        ]
    };
    Case {
        features: Features {
            consumable_capacity: true,
            prioritized_list: true,
            ..Default::default()
        },
        claims: vec![claim(
            CLAIM0,
            vec![distinct_attribute(&[REQ0, REQ1], &bool_attribute())],
            vec![
                prioritized(REQ0, subs()),
                prioritized(REQ1, subs()),
                prioritized(REQ2, subs()),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            device(DEVICE1)
                .attrs(&[("boolAttribute", bool_attr(true))])
                .multi(),
            device(DEVICE2)
                .attrs(&[("boolAttribute", bool_attr(false))])
                .multi(),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_shared(REQ0_SUB_REQ0, DRIVER_A, POOL1, DEVICE1, &[]),
                res_shared(REQ1_SUB_REQ1, DRIVER_A, POOL1, DEVICE2, &[]),
                res_shared("req-2/subReq-0", DRIVER_A, POOL1, DEVICE1, &[]),
            ],
        )]),
        ..Default::default()
    }
    .run("with-distinct-constraints-with-subrequests");
}

#[test]
fn distinct_constraint_one_multi_allocatable_device_with_distinct_constraint() {
    Case {
        features: consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![distinct_attribute(&[], &string_attribute())],
            vec![
                with_capacity_request(request(REQ0, CLASS_A, 1), Some("1")),
                with_capacity_request(request(REQ1, CLASS_A, 1), Some("1")),
            ],
        )],
        classes: vec![class_with_allow_multiple_allocations(
            CLASS_A, DRIVER_A, true,
        )],
        slices: one_slice(vec![
            device(DEVICE1)
                .attrs(&[("stringAttribute", string_attr("stringAttributeValue"))])
                .multi()
                .policy_range(&[(CAPACITY0, "2")]),
        ]),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("distinct-constraint-one-multi-allocatable-device-with-distinct-constraint");
}

#[test]
fn distinct_constraint_two_multi_allocatable_devices_with_distinct_constraint() {
    let dev = |d: &str, v: &str| {
        device(d)
            .attrs(&[("stringAttribute", string_attr(v))])
            .multi()
            .policy_range(&[(CAPACITY0, "4")])
    };
    Case {
        features: consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![distinct_attribute(&[], &string_attribute())],
            vec![
                with_capacity_request(request(REQ0, CLASS_A, 1), Some("2")),
                with_capacity_request(request(REQ1, CLASS_A, 1), Some("2")),
            ],
        )],
        classes: vec![class_with_allow_multiple_allocations(
            CLASS_A, DRIVER_A, true,
        )],
        slices: vec![
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![dev(DEVICE1, "stringAttributeValue1")],
            ),
            slice(
                SLICE1,
                Sel::Node(NODE1),
                resource_pool(POOL1, 2),
                DRIVER_A,
                vec![dev(DEVICE2, "stringAttributeValue2")],
            ),
        ],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res_shared(REQ0, DRIVER_A, POOL1, DEVICE1, &[(CAPACITY0, "2")]),
                res_shared(REQ1, DRIVER_A, POOL1, DEVICE2, &[(CAPACITY0, "2")]),
            ],
        )]),
        ..Default::default()
    }
    .run("distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint");
}

fn lists() -> Features {
    Features {
        list_type_attributes: true,
        ..Default::default()
    }
}

fn lists_consumable() -> Features {
    Features {
        list_type_attributes: true,
        consumable_capacity: true,
        ..Default::default()
    }
}

/// One claim, one request for `count` devices, one constraint.
fn list_case(
    name: &str,
    features: Features,
    distinct: bool,
    attribute: String,
    count: i64,
    devices: Vec<Dev>,
    expect: Expect,
) {
    let constraint = if distinct {
        distinct_attribute(&[], &attribute)
    } else {
        match_attribute(&[], &attribute)
    };
    Case {
        features,
        claims: vec![claim(
            CLAIM0,
            vec![constraint],
            vec![request(REQ0, CLASS_A, count)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(devices),
        expect,
        ..Default::default()
    }
    .run(name);
}

fn string_devs(values: &[DeviceAttribute]) -> Vec<Dev> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| device(&format!("device-{}", i + 1)).attrs(&[("stringAttribute", v.clone())]))
        .collect()
}

#[test]
fn list_attributes_match_constaint_scalar_string_values() {
    list_case(
        "list-attributes-match-constaint-scalar-string-values",
        lists(),
        false,
        string_attribute(),
        2,
        string_devs(&[string_attr("value1"), string_attr("value1")]),
        both(REQ0),
    );
}

#[test]
fn list_attributes_match_constaint_list_of_string_values_with_common_elements() {
    list_case(
        "list-attributes-match-constaint-list-of-string-values-with-common-elements",
        lists(),
        false,
        string_attribute(),
        2,
        string_devs(&[
            strings_attr(&["value1", "value2", "value3"]),
            strings_attr(&["value2", "value3", "value4"]),
        ]),
        both(REQ0),
    );
}

#[test]
fn list_attributes_match_constaint_list_of_string_values_with_partially_common_elements() {
    list_case(
        "list-attributes-match-constaint-list-of-string-values-with-partially-common-elements",
        lists(),
        false,
        string_attribute(),
        3,
        string_devs(&[
            strings_attr(&["value1", "value2"]),
            strings_attr(&["value2", "value3"]),
            strings_attr(&["value3", "value1"]),
        ]),
        Expect::NoFit,
    );
}

#[test]
fn list_attributes_match_constaint_list_of_string_values_without_common_elements() {
    Case {
        features: lists(),
        claims: vec![claim(
            CLAIM0,
            vec![match_attribute(&[], &string_attribute())],
            vec![request(REQ0, CLASS_A, 1), request(REQ0, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(string_devs(&[
            strings_attr(&["value1", "value2"]),
            strings_attr(&["value3", "value4"]),
        ])),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("list-attributes-match-constaint-list-of-string-values-without-common-elements");
}

#[test]
fn list_attributes_match_constaint_mixed_scalar_and_list_of_string_values_with_common_elements() {
    list_case(
        "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-common-elements",
        lists(),
        false,
        string_attribute(),
        2,
        string_devs(&[string_attr("value1"), strings_attr(&["value1", "value2"])]),
        both(REQ0),
    );
}

#[test]
fn list_attributes_match_constaint_mixed_scalar_and_list_of_string_values_with_partially_common_elements()
 {
    list_case(
        "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-with-partially-common-elements",
        lists(),
        false,
        string_attribute(),
        3,
        string_devs(&[
            string_attr("value1"),
            strings_attr(&["value1", "value2"]),
            strings_attr(&["value2", "value3"]),
        ]),
        Expect::NoFit,
    );
}

#[test]
fn list_attributes_match_constaint_mixed_scalar_and_list_of_string_values_without_common_elements()
{
    list_case(
        "list-attributes-match-constaint-mixed-scalar-and-list-of-string-values-without-common-elements",
        lists(),
        false,
        string_attribute(),
        2,
        string_devs(&[string_attr("value1"), strings_attr(&["value2", "value3"])]),
        Expect::NoFit,
    );
}

#[test]
fn list_attributes_match_constaint_list_of_int_values_with_common_elements() {
    list_case(
        "list-attributes-match-constaint-list-of-int-values-with-common-elements",
        lists(),
        false,
        int_attribute(),
        2,
        two_with("numa", ints_attr(&[0, 1, 2]), ints_attr(&[1, 2, 3])),
        both(REQ0),
    );
}

#[test]
fn list_attributes_match_constaint_list_of_bool_values_with_common_elements() {
    list_case(
        "list-attributes-match-constaint-list-of-bool-values-with-common-elements",
        lists(),
        false,
        bool_attribute(),
        2,
        two_with(
            "boolAttribute",
            bools_attr(&[true, false]),
            bools_attr(&[true]),
        ),
        both(REQ0),
    );
}

#[test]
fn list_attributes_match_constaint_list_of_version_values_with_common_elements() {
    list_case(
        "list-attributes-match-constaint-list-of-version-values-with-common-elements",
        lists(),
        false,
        version_attribute(),
        2,
        two_with(
            "driverVersion",
            versions_attr(&["1.0.0", "1.1.0", "2.0.0"]),
            versions_attr(&["1.1.0", "2.0.0", "2.1.0"]),
        ),
        both(REQ0),
    );
}

#[test]
fn list_attributes_match_constaint_with_empty_or_unknown_type() {
    list_case(
        "list-attributes-match-constaint-with-empty-or-unknown-type",
        lists(),
        false,
        string_attribute(),
        2,
        string_devs(&[DeviceAttribute::default(), strings_attr(&[])]),
        Expect::Error("unsupported attribute value"),
    );
}

#[test]
fn list_attributes_disabled_match_constraint_with_lists() {
    list_case(
        "list-attributes-disabled-match-constraint-with-lists",
        Features::default(),
        false,
        string_attribute(),
        2,
        string_devs(&[
            strings_attr(&["value1", "value2", "value3"]),
            strings_attr(&["value2", "value3", "value4"]),
        ]),
        Expect::NoFit,
    );
}

#[test]
fn list_attributes_distinct_constraint_scalar_string_values_all_distinct() {
    list_case(
        "list-attributes-distinct-constraint-scalar-string-values-all-distinct",
        lists_consumable(),
        true,
        string_attribute(),
        2,
        string_devs(&[string_attr("value1"), string_attr("value2")]),
        both(REQ0),
    );
}

#[test]
fn list_attributes_distinct_constraint_scalar_string_values_not_distinct() {
    list_case(
        "list-attributes-distinct-constraint-scalar-string-values-not-distinct",
        lists_consumable(),
        true,
        string_attribute(),
        2,
        string_devs(&[string_attr("value1"), string_attr("value1")]),
        Expect::NoFit,
    );
}

fn first_and_third() -> Expect {
    Expect::Results(vec![alloc(
        Some(local_selector(NODE1)),
        vec![
            res(REQ0, DRIVER_A, POOL1, DEVICE1, false),
            res(REQ0, DRIVER_A, POOL1, DEVICE3, false),
        ],
    )])
}

#[test]
fn list_attributes_distinct_constraint_list_of_string_values_all_distinct() {
    list_case(
        "list-attributes-distinct-constraint-list-of-string-values-all-distinct",
        lists_consumable(),
        true,
        string_attribute(),
        2,
        string_devs(&[
            strings_attr(&["value1", "value2"]),
            strings_attr(&["value2", "value3"]),
            strings_attr(&["value3", "value4"]),
        ]),
        first_and_third(),
    );
}

#[test]
fn list_attributes_distinct_constraint_list_of_string_values_with_common_elements() {
    list_case(
        "list-attributes-distinct-constraint-list-of-string-values-with-common-elements",
        lists_consumable(),
        true,
        string_attribute(),
        2,
        string_devs(&[
            strings_attr(&["value1", "value2", "value3"]),
            strings_attr(&["value2", "value4", "value5"]),
        ]),
        Expect::NoFit,
    );
}

#[test]
fn list_attributes_distinct_constraint_mixed_scalar_and_list_all_distinct() {
    list_case(
        "list-attributes-distinct-constraint-mixed-scalar-and-list-all-distinct",
        lists_consumable(),
        true,
        string_attribute(),
        2,
        string_devs(&[
            string_attr("value1"),
            strings_attr(&["value1", "value2"]),
            strings_attr(&["value2", "value3"]),
        ]),
        first_and_third(),
    );
}

#[test]
fn list_attributes_distinct_constraint_mixed_scalar_and_list_with_common_elements() {
    list_case(
        "list-attributes-distinct-constraint-mixed-scalar-and-list-with-common-elements",
        lists_consumable(),
        true,
        string_attribute(),
        2,
        string_devs(&[string_attr("value1"), strings_attr(&["value1", "value2"])]),
        Expect::NoFit,
    );
}

#[test]
fn list_attributes_distinct_constraint_list_of_int_values_all_distinct() {
    let devs = vec![
        device(DEVICE1).attrs(&[("numa", ints_attr(&[0, 1]))]),
        device(DEVICE2).attrs(&[("numa", ints_attr(&[1, 2]))]),
        device(DEVICE3).attrs(&[("numa", ints_attr(&[2, 3]))]),
    ];
    list_case(
        "list-attributes-distinct-constraint-list-of-int-values-all-distinct",
        lists_consumable(),
        true,
        int_attribute(),
        2,
        devs,
        first_and_third(),
    );
}

#[test]
fn list_attributes_distinct_constraint_list_of_bool_values_all_distinct() {
    let devs = vec![
        device(DEVICE1).attrs(&[("boolAttribute", bools_attr(&[true]))]),
        device(DEVICE2).attrs(&[("boolAttribute", bools_attr(&[true, false]))]),
        device(DEVICE3).attrs(&[("boolAttribute", bools_attr(&[false]))]),
    ];
    list_case(
        "list-attributes-distinct-constraint-list-of-bool-values-all-distinct",
        lists_consumable(),
        true,
        bool_attribute(),
        2,
        devs,
        first_and_third(),
    );
}

#[test]
fn list_attributes_distinct_constraint_list_of_version_values_all_distinct() {
    let devs = vec![
        device(DEVICE1).attrs(&[("driverVersion", versions_attr(&["1.0.0", "1.1.0"]))]),
        device(DEVICE2).attrs(&[("driverVersion", versions_attr(&["1.1.0", "2.0.0"]))]),
        device(DEVICE3).attrs(&[("driverVersion", versions_attr(&["2.0.0", "2.1.0"]))]),
    ];
    list_case(
        "list-attributes-distinct-constraint-list-of-version-values-all-distinct",
        lists_consumable(),
        true,
        version_attribute(),
        2,
        devs,
        first_and_third(),
    );
}

#[test]
fn list_attributes_distinct_constaint_with_empty_or_unknown_type() {
    let devs = vec![
        device(DEVICE1).attrs(&[("driverVersion", versions_attr(&[]))]),
        device(DEVICE2).attrs(&[("driverVersion", DeviceAttribute::default())]),
    ];
    list_case(
        "list-attributes-distinct-constaint-with-empty-or-unknown-type",
        lists_consumable(),
        true,
        version_attribute(),
        2,
        devs,
        Expect::Error("unsupported attribute value"),
    );
}

#[test]
fn list_attributes_disabled_distinct_constraint_with_lists() {
    list_case(
        "list-attributes-disabled-distinct-constraint-with-lists",
        Features {
            consumable_capacity: true,
            ..Default::default()
        },
        true,
        string_attribute(),
        2,
        string_devs(&[
            strings_attr(&["value1", "value2", "value3"]),
            strings_attr(&["value2", "value3", "value4"]),
        ]),
        Expect::NoFit,
    );
}

// Cases added upstream with kubernetes#140600 (distinct values are compared
// across every device held, also within one request) and the list-mode
// intersection restore on backtracking.

fn numbered(devices: &[&str]) -> Expect {
    Expect::Results(vec![alloc(
        Some(local_selector(NODE1)),
        devices
            .iter()
            .map(|d| res(REQ0, DRIVER_A, POOL1, d, false))
            .collect(),
    )])
}

fn v1_v2_v1() -> Vec<Dev> {
    string_devs(&[
        string_attr("value1"),
        string_attr("value2"),
        string_attr("value1"),
    ])
}

fn v1_v2_v3() -> Vec<Dev> {
    string_devs(&[
        string_attr("value1"),
        string_attr("value2"),
        string_attr("value3"),
    ])
}

fn numa_devs(values: &[i64]) -> Vec<Dev> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| device(&format!("device-{}", i + 1)).attrs(&[("numa", int_attr(*v))]))
        .collect()
}

#[test]
fn distinct_constraint_single_request_count_3_not_distinct() {
    list_case(
        "distinct-constraint-single-request-count-3-not-distinct",
        consumable(),
        true,
        string_attribute(),
        3,
        v1_v2_v1(),
        Expect::NoFit,
    );
}

#[test]
fn distinct_constraint_single_request_count_3_all_distinct() {
    list_case(
        "distinct-constraint-single-request-count-3-all-distinct",
        consumable(),
        true,
        string_attribute(),
        3,
        v1_v2_v3(),
        numbered(&[DEVICE1, DEVICE2, DEVICE3]),
    );
}

#[test]
fn distinct_constraint_two_requests_with_count_not_distinct() {
    Case {
        features: consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![distinct_attribute(&[REQ0, REQ1], &string_attribute())],
            vec![request(REQ0, CLASS_A, 2), request(REQ1, CLASS_A, 1)],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(v1_v2_v1()),
        expect: Expect::NoFit,
        ..Default::default()
    }
    .run("distinct-constraint-two-requests-with-count-not-distinct");
}

#[test]
fn distinct_constraint_single_request_multiple_devices_attribute_not_set() {
    list_case(
        "distinct-constraint-single-request-multiple-devices-attribute-not-set",
        consumable(),
        true,
        int_attribute(),
        3,
        vec![device(DEVICE1), device(DEVICE2), device(DEVICE3)],
        Expect::NoFit,
    );
}

#[test]
fn distinct_constraint_single_request_not_enough_distinct_values() {
    list_case(
        "distinct-constraint-single-request-not-enough-distinct-values",
        consumable(),
        true,
        int_attribute(),
        3,
        numa_devs(&[1, 2, 2, 2]),
        Expect::NoFit,
    );
}

#[test]
fn distinct_constraint_single_request_multiple_devices_attribute_set() {
    list_case(
        "distinct-constraint-single-request-multiple-devices-attribute-set",
        consumable(),
        true,
        int_attribute(),
        3,
        numa_devs(&[1, 2, 1, 3]),
        numbered(&[DEVICE1, DEVICE2, "device-4"]),
    );
}

#[test]
fn list_attributes_distinct_constraint_single_request_count_3_not_distinct() {
    list_case(
        "list-attributes-distinct-constraint-single-request-count-3-not-distinct",
        lists_consumable(),
        true,
        string_attribute(),
        3,
        v1_v2_v1(),
        Expect::NoFit,
    );
}

#[test]
fn list_attributes_distinct_constraint_single_request_count_3_all_distinct() {
    list_case(
        "list-attributes-distinct-constraint-single-request-count-3-all-distinct",
        lists_consumable(),
        true,
        string_attribute(),
        3,
        v1_v2_v3(),
        numbered(&[DEVICE1, DEVICE2, DEVICE3]),
    );
}

#[test]
fn list_attributes_distinct_constraint_backtrack_needs_remove() {
    let dev = |d: &str, v: &[&str]| device(d).attrs(&[("stringAttribute", strings_attr(v))]);
    Case {
        features: lists_consumable(),
        claims: vec![claim(
            CLAIM0,
            vec![distinct_attribute(&[REQ0, REQ1, REQ2], &string_attribute())],
            vec![
                request(REQ0, CLASS_A, 1),
                request(REQ1, CLASS_A, 1),
                request(REQ2, CLASS_A, 1),
            ],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: one_slice(vec![
            dev(DEVICE1, &["value1", "value2", "value3"]),
            dev(DEVICE2, &["value3", "value4", "value5"]),
            dev(DEVICE3, &["value1", "value2"]),
            dev("device-4", &["value3", "value4"]),
            dev(DEVICE0, &["value5", "value6"]),
        ]),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, DEVICE3, false),
                res(REQ1, DRIVER_A, POOL1, "device-4", false),
                res(REQ2, DRIVER_A, POOL1, DEVICE0, false),
            ],
        )]),
        ..Default::default()
    }
    .run("list-attributes-distinct-constraint-backtrack-needs-remove");
}

#[test]
fn list_attributes_match_constraint_backtrack_needs_intersection_restore() {
    list_case(
        "list-attributes-match-constraint-backtrack-needs-intersection-restore",
        lists(),
        false,
        string_attribute(),
        3,
        string_devs(&[
            strings_attr(&["value1", "value2"]),
            strings_attr(&["value1"]),
            strings_attr(&["value2"]),
            strings_attr(&["value2"]),
        ]),
        numbered(&[DEVICE1, DEVICE3, "device-4"]),
    );
}

/// KEP-6072's standardized NUMA attribute, published under its full name.
const NUMA_NODE: &str = "resource.kubernetes.io/numaNode";

fn numa_node_case(name: &str, first: &[i64], expect: Expect) {
    list_case(
        name,
        lists(),
        false,
        NUMA_NODE.to_string(),
        2,
        vec![
            device(DEVICE1).attrs(&[(NUMA_NODE, ints_attr(first))]),
            device(DEVICE2).attrs(&[(NUMA_NODE, ints_attr(&[4, 5, 6, 7]))]),
        ],
        expect,
    );
}

#[test]
fn numanode_matchattribute_overlapping_lists_are_co_placed() {
    numa_node_case(
        "numanode-matchattribute-overlapping-lists-are-co-placed",
        &[4],
        numbered(&[DEVICE1, DEVICE2]),
    );
}

#[test]
fn numanode_matchattribute_disjoint_lists_are_not_allocated() {
    numa_node_case(
        "numanode-matchattribute-disjoint-lists-are-not-allocated",
        &[0],
        Expect::NoFit,
    );
}
