//! Which allocator the scheduler runs, and what that means for fields of
//! disabled features. Upstream's `structured.NewAllocator` takes the first
//! of stable, incubating and experimental whose supported features cover the
//! enabled ones (kubernetes/dynamic-resource-allocation@3d036712
//! `structured/allocator.go`); stable supports admin access, prioritized
//! lists, partitionable devices and device taints only. Our own cases: the
//! shared upstream table runs each case on the variants that support its
//! features, so it never asks the stable allocator about incubating fields.

use super::harness::*;

fn numa(n: i64) -> Dev {
    device(&format!("device-{n}")).attrs(&[("numa", int_attr(n))])
}

fn distinct_claim() -> Vec<k8s_openapi::api::resource::v1::ResourceClaim> {
    vec![claim(
        CLAIM0,
        vec![distinct_attribute(&[], &format!("{DRIVER_A}/numa"))],
        vec![request(REQ0, CLASS_A, 2)],
    )]
}

fn two_devices_same_numa_then_other() -> Vec<k8s_openapi::api::resource::v1::ResourceSlice> {
    let mut same = numa(0);
    same.0.name = "device-0b".into();
    vec![slice(
        SLICE1,
        Sel::Node(NODE1),
        pool(POOL1),
        DRIVER_A,
        vec![numa(0), same, numa(1)],
    )]
}

/// Stable's constraint switch knows `matchAttribute` only: a
/// `distinctAttribute` is its "empty constraint" error, which fails the pod.
#[test]
fn stable_allocator_refuses_distinct_attribute() {
    Case {
        features: Features {
            prioritized_list: true,
            device_taints: true,
            ..Default::default()
        },
        claims: distinct_claim(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: two_devices_same_numa_then_other(),
        expect: Expect::Error(
            "claim claim-0, constraint #0: empty constraint (unsupported constraint type?)",
        ),
        ..Default::default()
    }
    .run("stable-allocator-refuses-distinct-attribute");
}

/// With binding conditions and device status on, the incubating allocator
/// runs and honours `distinctAttribute` even with consumable capacity off.
#[test]
fn incubating_allocator_honours_distinct_attribute_without_consumable_capacity() {
    Case {
        features: Features {
            device_binding_and_status: true,
            ..Default::default()
        },
        claims: distinct_claim(),
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: two_devices_same_numa_then_other(),
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![
                res(REQ0, DRIVER_A, POOL1, "device-0", false),
                res(REQ0, DRIVER_A, POOL1, "device-1", false),
            ],
        )]),
        ..Default::default()
    }
    .run("incubating-allocator-honours-distinct-attribute");
}

/// Stable never reads `capacity.requests`: the device is allocated whole,
/// with no consumed capacity and no share ID.
#[test]
fn stable_allocator_ignores_capacity_requests() {
    Case {
        features: Features::default(),
        claims: vec![claim(
            CLAIM0,
            vec![],
            vec![with_capacity_request(request(REQ0, CLASS_A, 1), Some("1"))],
        )],
        classes: vec![class(CLASS_A, DRIVER_A)],
        slices: vec![slice_with_one_device(
            SLICE1,
            Sel::Node(NODE1),
            pool(POOL1),
            DRIVER_A,
        )],
        expect: Expect::Results(vec![alloc(
            Some(local_selector(NODE1)),
            vec![res(REQ0, DRIVER_A, POOL1, DEVICE1, false)],
        )]),
        ..Default::default()
    }
    .run("stable-allocator-ignores-capacity-requests");
}
