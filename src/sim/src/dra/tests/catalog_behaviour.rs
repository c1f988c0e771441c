//! Behaviour beyond upstream's allocator table: DeviceTaintRules (as the
//! scheduler's slice tracker applies them), template-node slices added and
//! removed at run time, cache invalidation, pool order, the reasons given on
//! failure, and gate-off behaviour of the catalog.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{
    DeviceTaintRule, DeviceTaintRuleSpec, DeviceTaintSelector, ResourceClaim,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::super::{AllocError, AllocateOutcome, AllocatedState, DraCatalog, ShareIdGenerator};
use super::harness::*;
use crate::gates::FeatureGates;

fn allocate(
    catalog: &mut DraCatalog,
    node: &Node,
    claims: &[ResourceClaim],
    state: &AllocatedState,
) -> Result<AllocateOutcome, AllocError> {
    let refs: Vec<&ResourceClaim> = claims.iter().collect();
    catalog.allocate(node, &refs, state, &mut ShareIdGenerator::default())
}

fn devices_of(outcome: &Result<AllocateOutcome, AllocError>) -> Vec<String> {
    match outcome {
        Ok(AllocateOutcome::Allocated(results)) => results
            .iter()
            .flat_map(|r| r.devices.iter().flat_map(|d| d.results.iter().flatten()))
            .map(|r| format!("{}/{}", r.pool, r.device))
            .collect(),
        other => panic!("expected an allocation, got {other:?}"),
    }
}

fn reasons_of(outcome: &Result<AllocateOutcome, AllocError>) -> Vec<String> {
    match outcome {
        Ok(AllocateOutcome::Unschedulable { reasons }) => {
            reasons.iter().map(ToString::to_string).collect()
        }
        other => panic!("expected no fit, got {other:?}"),
    }
}

fn rule(
    name: &str,
    driver: Option<&str>,
    pool: Option<&str>,
    device: Option<&str>,
    effect: &str,
) -> DeviceTaintRule {
    DeviceTaintRule {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: DeviceTaintRuleSpec {
            device_selector: Some(DeviceTaintSelector {
                driver: driver.map(Into::into),
                pool: pool.map(Into::into),
                device: device.map(Into::into),
            }),
            taint: taint("maintenance", "true", effect),
        },
        status: None,
    }
}

fn two_devices() -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    vec![slice(
        SLICE1,
        Sel::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
        vec![device(DEVICE1), device(DEVICE2)],
    )]
}

fn all_gates() -> FeatureGates {
    FeatureGates::default()
}

#[test]
fn device_taint_rules_taint_the_selected_device_only() {
    let rules = [rule(
        "r",
        Some(DRIVER_A),
        Some(POOL1),
        Some(DEVICE1),
        "NoSchedule",
    )];
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &two_devices(),
        &rules,
    );
    let out = allocate(
        &mut catalog,
        &node(NODE1, REGION1),
        &[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        &AllocatedState::default(),
    );
    assert_eq!(devices_of(&out), vec!["pool-1/device-2"]);
}

#[test]
fn device_taint_rule_without_fields_matches_every_device() {
    let mut all = rule("r", None, None, None, "NoExecute");
    all.spec.device_selector = Some(DeviceTaintSelector::default());
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &two_devices(),
        &[all],
    );
    let out = allocate(
        &mut catalog,
        &node(NODE1, REGION1),
        &[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        &AllocatedState::default(),
    );
    let reasons = reasons_of(&out);
    assert!(
        reasons[0].contains("device device-1 is tainted maintenance=true:NoExecute and the request does not tolerate it"),
        "{reasons:?}"
    );
}

#[test]
fn device_taint_rules_for_other_drivers_or_pools_do_not_apply() {
    let rules = [
        rule("other-driver", Some(DRIVER_B), None, None, "NoSchedule"),
        rule(
            "other-pool",
            Some(DRIVER_A),
            Some(POOL2),
            None,
            "NoSchedule",
        ),
        rule("no-effect", None, None, None, "None"),
    ];
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &two_devices(),
        &rules,
    );
    let out = allocate(
        &mut catalog,
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)])],
        &AllocatedState::default(),
    );
    assert_eq!(devices_of(&out), vec!["pool-1/device-1", "pool-1/device-2"]);
}

#[test]
fn device_taint_rules_are_ignored_without_their_gate_and_tolerations_still_work() {
    let rules = [rule("r", None, None, None, "NoSchedule")];
    let mut off = all_gates();
    off.device_taint_rules = false;
    let node = node(NODE1, REGION1);
    let claims = [claim_with_request(CLAIM0, REQ0, CLASS_A)];
    let mut catalog = DraCatalog::new(off, &[class(CLASS_A, DRIVER_A)], &two_devices(), &rules);
    assert_eq!(
        devices_of(&allocate(
            &mut catalog,
            &node,
            &claims,
            &AllocatedState::default()
        )),
        vec!["pool-1/device-1"]
    );

    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &two_devices(),
        &rules,
    );
    assert!(matches!(
        allocate(&mut catalog, &node, &claims, &AllocatedState::default()),
        Ok(AllocateOutcome::Unschedulable { .. })
    ));
    let tolerating = [with_tolerations(
        claim_with_request(CLAIM0, REQ0, CLASS_A),
        &[toleration("Exists", "maintenance", "", "NoSchedule")],
    )];
    assert_eq!(
        devices_of(&allocate(
            &mut catalog,
            &node,
            &tolerating,
            &AllocatedState::default()
        )),
        vec!["pool-1/device-1"]
    );
}

#[test]
fn template_node_slices_can_be_added_and_removed() {
    let template = "template-0";
    let mut catalog = DraCatalog::new(all_gates(), &[class(CLASS_A, DRIVER_A)], &[], &[]);
    let node = node(template, REGION1);
    let claims = [claim_with_request(CLAIM0, REQ0, CLASS_A)];
    let state = AllocatedState::default();
    assert!(matches!(
        allocate(&mut catalog, &node, &claims, &state),
        Ok(AllocateOutcome::Unschedulable { .. })
    ));
    catalog.add_slice(slice(
        SLICE1,
        Sel::Node("template-0"),
        pool("template-0-gpus"),
        DRIVER_A,
        vec![device(DEVICE1)],
    ));
    assert_eq!(
        devices_of(&allocate(&mut catalog, &node, &claims, &state)),
        vec!["template-0-gpus/device-1"]
    );
    catalog.remove_slices_for_node(template);
    assert!(matches!(
        allocate(&mut catalog, &node, &claims, &state),
        Ok(AllocateOutcome::Unschedulable { .. })
    ));
    // Slots of removed devices are reused; their cached verdicts must not leak.
    catalog.add_slice(slice(
        SLICE1,
        Sel::Node("template-0"),
        pool("template-0-gpus"),
        DRIVER_B,
        vec![device(DEVICE1)],
    ));
    assert!(matches!(
        allocate(&mut catalog, &node, &claims, &state),
        Ok(AllocateOutcome::Unschedulable { .. })
    ));
}

#[test]
fn a_new_shared_slice_is_seen_by_nodes_with_cached_pools() {
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &two_devices(),
        &[],
    );
    let node = node(NODE1, REGION1);
    let claims = [claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 3)])];
    let state = AllocatedState::default();
    assert!(matches!(
        allocate(&mut catalog, &node, &claims, &state),
        Ok(AllocateOutcome::Unschedulable { .. })
    ));
    catalog.add_slice(slice(
        SLICE2,
        Sel::All,
        pool(POOL2),
        DRIVER_A,
        vec![device(DEVICE3)],
    ));
    assert_eq!(
        devices_of(&allocate(&mut catalog, &node, &claims, &state)),
        vec!["pool-1/device-1", "pool-1/device-2", "pool-2/device-3"]
    );
}

#[test]
fn an_obsolete_generation_on_another_node_invalidates_cached_pools() {
    // Node 1 sees an incomplete pool; a newer generation published for node 2
    // makes it obsolete (upstream scans all slices of incomplete pools).
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &[slice(
            SLICE1,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![device(DEVICE1)],
        )],
        &[],
    );
    let node = node(NODE1, REGION1);
    let claims = [claim(CLAIM0, vec![], vec![all_request(REQ0, CLASS_A)])];
    let state = AllocatedState::default();
    let incomplete = allocate(&mut catalog, &node, &claims, &state);
    assert!(
        matches!(&incomplete, Err(AllocError::Fatal(m)) if m.contains("is currently being updated")),
        "{incomplete:?}"
    );
    catalog.add_slice(slice(
        SLICE2,
        Sel::Node(NODE2),
        PoolSpec(POOL1, 1, 2),
        DRIVER_A,
        vec![device(DEVICE2)],
    ));
    let after = allocate(&mut catalog, &node, &claims, &state);
    let reasons = reasons_of(&after);
    assert!(
        reasons[0].contains("allocationMode All needs at least one device"),
        "{reasons:?}"
    );
}

#[test]
fn node_label_changes_are_noticed() {
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &[slice_with_one_device(
            SLICE1,
            Sel::Selector(label_selector(REGION_KEY, &[REGION1])),
            pool(POOL1),
            DRIVER_A,
        )],
        &[],
    );
    let claims = [claim_with_request(CLAIM0, REQ0, CLASS_A)];
    let state = AllocatedState::default();
    assert_eq!(
        devices_of(&allocate(
            &mut catalog,
            &node(NODE1, REGION1),
            &claims,
            &state
        )),
        vec!["pool-1/device-1"]
    );
    assert!(matches!(
        allocate(&mut catalog, &node(NODE1, REGION2), &claims, &state),
        Ok(AllocateOutcome::Unschedulable { .. })
    ));
}

#[test]
fn all_nodes_devices_need_no_node_selector() {
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &[slice_with_one_device(
            SLICE1,
            Sel::All,
            pool(POOL1),
            DRIVER_A,
        )],
        &[],
    );
    let out = allocate(
        &mut catalog,
        &node(NODE1, REGION1),
        &[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        &AllocatedState::default(),
    );
    match out {
        Ok(AllocateOutcome::Allocated(results)) => assert_eq!(results[0].node_selector, None),
        other => panic!("{other:?}"),
    }
}

#[test]
fn pools_are_searched_by_driver_then_name_whatever_the_input_order() {
    let slices = vec![
        slice_with_one_device("z", Sel::Node(NODE1), pool("pool-b"), DRIVER_A),
        slice_with_one_device("y", Sel::Node(NODE1), pool("pool-a"), DRIVER_B),
        slice_with_one_device("x", Sel::Node(NODE1), pool("pool-a"), DRIVER_A),
    ];
    let class_any = {
        let mut c = class(CLASS_A, DRIVER_A);
        c.spec.as_mut().unwrap().selectors = Some(vec![cel("true")]);
        c
    };
    let mut catalog = DraCatalog::new(all_gates(), &[class_any], &slices, &[]);
    let out = allocate(
        &mut catalog,
        &node(NODE1, REGION1),
        &[claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 3)])],
        &AllocatedState::default(),
    );
    assert_eq!(
        devices_of(&out),
        vec!["pool-a/device-1", "pool-b/device-1", "pool-a/device-1"]
    );
    match out {
        Ok(AllocateOutcome::Allocated(r)) => {
            let drivers: Vec<&str> = r[0]
                .devices
                .as_ref()
                .unwrap()
                .results
                .as_ref()
                .unwrap()
                .iter()
                .map(|d| d.driver.as_str())
                .collect();
            assert_eq!(drivers, vec![DRIVER_A, DRIVER_A, DRIVER_B]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn equally_named_pools_of_two_drivers_keep_separate_counters() {
    // Upstream keys counter state by pool name only; we key by (driver, pool).
    let counters = |driver: &str, slice_name: &str| {
        counter_slice(
            slice_name,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            driver,
            vec![counter_set(COUNTER_SET1, &[("mem", "1")])],
        )
    };
    let devices = |driver: &str, slice_name: &str| {
        slice(
            slice_name,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            driver,
            vec![device(DEVICE1).consumes(COUNTER_SET1, &[("mem", "1")], false)],
        )
    };
    let slices = vec![
        counters(DRIVER_A, "a-c"),
        devices(DRIVER_A, "a-d"),
        counters(DRIVER_B, "b-c"),
        devices(DRIVER_B, "b-d"),
    ];
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)],
        &slices,
        &[],
    );
    let out = allocate(
        &mut catalog,
        &node(NODE1, REGION1),
        &[claim(
            CLAIM0,
            vec![],
            vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_B, 1)],
        )],
        &AllocatedState::default(),
    );
    assert_eq!(devices_of(&out), vec!["pool-1/device-1", "pool-1/device-1"]);
}

#[test]
fn partitionable_gate_off_still_counts_counter_slices_for_completeness() {
    // The node's own scan skips the counter slice, but upstream's completeness
    // check over all slices of the pool counts it: the pool is complete and
    // its plain device is usable.
    let mut gates = all_gates();
    gates.partitionable_devices = false;
    let slices = vec![
        slice(
            SLICE1,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![device(DEVICE1)],
        ),
        counter_slice(
            SLICE2,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![counter_set(COUNTER_SET1, &[("mem", "1")])],
        ),
    ];
    let mut catalog = DraCatalog::new(gates, &[class(CLASS_A, DRIVER_A)], &slices, &[]);
    let out = allocate(
        &mut catalog,
        &node(NODE1, REGION1),
        &[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        &AllocatedState::default(),
    );
    assert_eq!(devices_of(&out), vec!["pool-1/device-1"]);
    // A pool that really lacks a slice is incomplete, and the reasons say so.
    let lone = vec![slice(
        SLICE1,
        Sel::Node(NODE1),
        resource_pool(POOL1, 2),
        DRIVER_A,
        vec![device(DEVICE1)],
    )];
    let mut catalog = DraCatalog::new(gates, &[class(CLASS_A, DRIVER_A)], &lone, &[]);
    let out = allocate(
        &mut catalog,
        &node(NODE1, REGION1),
        &[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        &AllocatedState::default(),
    );
    let reasons = reasons_of(&out);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("resource pool driver-a/pool-1 is incomplete")),
        "{reasons:?}"
    );
}

#[test]
fn unparsable_slice_node_selector_is_fatal() {
    let bad = k8s_openapi::api::core::v1::NodeSelector {
        node_selector_terms: vec![k8s_openapi::api::core::v1::NodeSelectorTerm {
            match_expressions: Some(vec![k8s_openapi::api::core::v1::NodeSelectorRequirement {
                key: REGION_KEY.into(),
                operator: "Gt".into(),
                values: Some(vec!["not-a-number".into()]),
            }]),
            match_fields: None,
        }],
    };
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &[slice_with_one_device(
            SLICE1,
            Sel::Selector(bad),
            pool(POOL1),
            DRIVER_A,
        )],
        &[],
    );
    let out = allocate(
        &mut catalog,
        &node(NODE1, REGION1),
        &[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        &AllocatedState::default(),
    );
    assert!(
        matches!(&out, Err(AllocError::Fatal(m)) if m.starts_with("gather pool information: failed to perform node selection for slice slice-1")),
        "{out:?}"
    );
}

#[test]
fn reasons_count_matching_and_free_devices() {
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &two_devices(),
        &[],
    );
    let node = node(NODE1, REGION1);
    let mut c = claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 3)]);
    c.metadata.namespace = Some("ml".into());
    let out = allocate(
        &mut catalog,
        &node,
        std::slice::from_ref(&c),
        &AllocatedState::default(),
    );
    assert_eq!(
        reasons_of(&out),
        vec![
            "cannot allocate all claims: claim ml/claim-0 request req-0: 2 devices of class class-a match the selectors, 3 needed"
        ]
    );
    let mut state = AllocatedState::default();
    state.mark_allocated(&id(DRIVER_A, POOL1, DEVICE1));
    let two = claim(CLAIM0, vec![], vec![request(REQ0, CLASS_A, 2)]);
    let reasons = reasons_of(&allocate(&mut catalog, &node, &[two], &state));
    assert_eq!(
        reasons,
        vec![
            "cannot allocate all claims: claim claim-0 request req-0: 2 devices match but only 1 is free, 2 needed (device device-1 is allocated)"
        ]
    );
}

#[test]
fn reasons_name_exhausted_counters_and_failed_constraints() {
    let slices = vec![
        slice(
            SLICE1,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![device(DEVICE1).consumes(COUNTER_SET1, &[("memory", "80Gi")], false)],
        ),
        counter_slice(
            SLICE2,
            Sel::Node(NODE1),
            resource_pool(POOL1, 2),
            DRIVER_A,
            vec![counter_set(COUNTER_SET1, &[("memory", "40Gi")])],
        ),
    ];
    let mut catalog = DraCatalog::new(all_gates(), &[class(CLASS_A, DRIVER_A)], &slices, &[]);
    let node = node(NODE1, REGION1);
    let reasons = reasons_of(&allocate(
        &mut catalog,
        &node,
        &[claim_with_request(CLAIM0, REQ0, CLASS_A)],
        &AllocatedState::default(),
    ));
    assert_eq!(
        reasons,
        vec![
            "cannot allocate all claims: claim claim-0 request req-0: 0 devices left after shared counters, 1 needed: device device-1: counter set counter-set-1 counter memory exhausted (40Gi left, 80Gi needed)"
        ]
    );

    let slices = vec![slice(
        SLICE1,
        Sel::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
        vec![
            device(DEVICE1).attrs(&[("numa", int_attr(0))]),
            device(DEVICE2).attrs(&[("numa", int_attr(1))]),
        ],
    )];
    let mut catalog = DraCatalog::new(all_gates(), &[class(CLASS_A, DRIVER_A)], &slices, &[]);
    let c = claim(
        CLAIM0,
        vec![match_attribute(&[], &format!("{DRIVER_A}/numa"))],
        vec![request(REQ0, CLASS_A, 1), request(REQ1, CLASS_A, 1)],
    );
    let reasons = reasons_of(&allocate(
        &mut catalog,
        &node,
        &[c],
        &AllocatedState::default(),
    ));
    assert_eq!(
        reasons,
        vec![
            "cannot allocate all claims: claim claim-0: constraint matchAttribute driver-a/numa cannot be satisfied by the free devices"
        ]
    );
}

#[test]
fn share_ids_are_deterministic_and_uuid_shaped() {
    let mut ids = ShareIdGenerator::default();
    assert_eq!(ids.next_id(), "00000000-0000-4000-8000-000000000001");
    assert_eq!(ids.next_id(), "00000000-0000-4000-8000-000000000002");
}

#[test]
fn cached_selector_errors_stay_fatal_on_every_call() {
    let mut catalog = DraCatalog::new(
        all_gates(),
        &[class(CLASS_A, DRIVER_A)],
        &two_devices(),
        &[],
    );
    let node = node(NODE1, REGION1);
    let bad = edit_exact(claim_with_request(CLAIM0, REQ0, CLASS_A), |e| {
        e.selectors = Some(vec![cel(r#"device.attributes["driver-a"].missing == 1"#)]);
    });
    for _ in 0..2 {
        let out = allocate(
            &mut catalog,
            &node,
            std::slice::from_ref(&bad),
            &AllocatedState::default(),
        );
        assert!(
            matches!(&out, Err(AllocError::Fatal(m)) if m.contains("claim claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime error")),
            "{out:?}"
        );
    }
}
