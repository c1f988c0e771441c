//! `resource.k8s.io/v1` `ResourceSlice` -> Kubernetes protobuf bytes, as Go's
//! `(*resourcev1.ResourceSlice).Marshal()` writes them (externalgrpc's `resourceSliceBytes`,
//! one message per slice).
//!
//! Field numbers are those of k8s.io/api `resource/v1/generated.proto` (v0.37). Every field of
//! the spec k8s-openapi's `v1_37` types carry is written, so nothing a template says is lost;
//! `metadata` is the subset [`super::node`] writes (a template slice has no owner references
//! or managed fields). What Go writes always (non-pointer fields: strings, `pool`, quantities
//! that are values) is written always, pointer fields only when set, map entries sorted by key.
//! A Go-side test decodes these bytes with k8s.io/api and compares them with Go's own
//! `Marshal()` (cloudproviders/proto/upstream-go).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement};
use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, Counter, CounterSet, Device, DeviceAttribute, DeviceCapacity,
    DeviceCounterConsumption, DeviceTaint, NodeAllocatableResource, ResourceSlice,
    ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::node::{encode_meta, encode_time, opt};
use super::wire::{put_bool, put_int, put_message, put_str};

/// Encodes a ResourceSlice as Go's `Marshal()` would (no envelope).
///
/// Quantities are written as given; Go writes the canonical form, so byte-identical output
/// needs canonical quantities in the input (the bytes decode to the same value either way).
#[must_use]
pub fn encode_resource_slice(slice: &ResourceSlice) -> Vec<u8> {
    let mut buf = Vec::new();
    put_message(&mut buf, 1, |b| encode_meta(b, &slice.metadata));
    put_message(&mut buf, 2, |b| encode_spec(b, &slice.spec));
    buf
}

fn put_quantity(buf: &mut Vec<u8>, field: u32, quantity: &Quantity) {
    put_message(buf, field, |b| put_str(b, 1, &quantity.0));
}

fn put_strings(buf: &mut Vec<u8>, field: u32, values: Option<&Vec<String>>) {
    for value in values.into_iter().flatten() {
        put_str(buf, field, value);
    }
}

/// A map field: one `{key = 1, value = 2}` entry per key, in key order.
fn put_map<V>(
    buf: &mut Vec<u8>,
    field: u32,
    map: Option<&BTreeMap<String, V>>,
    encode: impl Fn(&mut Vec<u8>, &V),
) {
    for (key, value) in map.into_iter().flatten() {
        put_message(buf, field, |b| {
            put_str(b, 1, key);
            put_message(b, 2, |v| encode(v, value));
        });
    }
}

fn encode_spec(buf: &mut Vec<u8>, spec: &ResourceSliceSpec) {
    put_str(buf, 1, &spec.driver);
    put_message(buf, 2, |b| {
        put_str(b, 1, &spec.pool.name);
        put_int(b, 2, spec.pool.generation);
        put_int(b, 3, spec.pool.resource_slice_count);
    });
    if let Some(node_name) = &spec.node_name {
        put_str(buf, 3, node_name);
    }
    if let Some(selector) = &spec.node_selector {
        put_message(buf, 4, |b| encode_node_selector(b, selector));
    }
    if let Some(all) = spec.all_nodes {
        put_bool(buf, 5, all);
    }
    for device in spec.devices.iter().flatten() {
        put_message(buf, 6, |b| encode_device(b, device));
    }
    if let Some(per_device) = spec.per_device_node_selection {
        put_bool(buf, 7, per_device);
    }
    for set in spec.shared_counters.iter().flatten() {
        put_message(buf, 8, |b| encode_counter_set(b, set));
    }
    if let Some(attribute) = &spec.partition_type_attribute {
        put_str(buf, 9, attribute);
    }
    put_strings(buf, 10, spec.skip_node_operations.as_ref());
}

fn encode_node_selector(buf: &mut Vec<u8>, selector: &NodeSelector) {
    for term in &selector.node_selector_terms {
        put_message(buf, 1, |b| {
            for requirement in term.match_expressions.iter().flatten() {
                put_message(b, 1, |r| encode_requirement(r, requirement));
            }
            for requirement in term.match_fields.iter().flatten() {
                put_message(b, 2, |r| encode_requirement(r, requirement));
            }
        });
    }
}

fn encode_requirement(buf: &mut Vec<u8>, requirement: &NodeSelectorRequirement) {
    put_str(buf, 1, &requirement.key);
    put_str(buf, 2, &requirement.operator);
    put_strings(buf, 3, requirement.values.as_ref());
}

fn encode_counter(buf: &mut Vec<u8>, counter: &Counter) {
    put_quantity(buf, 1, &counter.value);
}

fn encode_counter_set(buf: &mut Vec<u8>, set: &CounterSet) {
    put_str(buf, 1, &set.name);
    put_map(buf, 2, Some(&set.counters), encode_counter);
}

fn encode_device(buf: &mut Vec<u8>, device: &Device) {
    put_str(buf, 1, &device.name);
    put_map(buf, 2, device.attributes.as_ref(), encode_attribute);
    put_map(buf, 3, device.capacity.as_ref(), encode_capacity);
    for consumption in device.consumes_counters.iter().flatten() {
        put_message(buf, 4, |b| encode_consumption(b, consumption));
    }
    if let Some(node_name) = &device.node_name {
        put_str(buf, 5, node_name);
    }
    if let Some(selector) = &device.node_selector {
        put_message(buf, 6, |b| encode_node_selector(b, selector));
    }
    if let Some(all) = device.all_nodes {
        put_bool(buf, 7, all);
    }
    for taint in device.taints.iter().flatten() {
        put_message(buf, 8, |b| encode_taint(b, taint));
    }
    if let Some(binds) = device.binds_to_node {
        put_bool(buf, 9, binds);
    }
    put_strings(buf, 10, device.binding_conditions.as_ref());
    put_strings(buf, 11, device.binding_failure_conditions.as_ref());
    if let Some(allow) = device.allow_multiple_allocations {
        put_bool(buf, 12, allow);
    }
    put_map(
        buf,
        14,
        device.node_allocatable_resources.as_ref(),
        encode_node_allocatable,
    );
}

fn encode_attribute(buf: &mut Vec<u8>, attribute: &DeviceAttribute) {
    if let Some(value) = attribute.int {
        put_int(buf, 2, value);
    }
    if let Some(value) = attribute.bool {
        put_bool(buf, 3, value);
    }
    if let Some(value) = &attribute.string {
        put_str(buf, 4, value);
    }
    if let Some(value) = &attribute.version {
        put_str(buf, 5, value);
    }
    // Repeated scalars are not packed: the Kubernetes protos are proto2.
    for value in attribute.ints.iter().flatten() {
        put_int(buf, 6, *value);
    }
    for value in attribute.bools.iter().flatten() {
        put_bool(buf, 7, *value);
    }
    put_strings(buf, 8, attribute.strings.as_ref());
    put_strings(buf, 9, attribute.versions.as_ref());
}

fn encode_capacity(buf: &mut Vec<u8>, capacity: &DeviceCapacity) {
    put_quantity(buf, 1, &capacity.value);
    if let Some(policy) = &capacity.request_policy {
        put_message(buf, 2, |b| encode_request_policy(b, policy));
    }
}

fn encode_request_policy(buf: &mut Vec<u8>, policy: &CapacityRequestPolicy) {
    if let Some(default) = &policy.default {
        put_quantity(buf, 1, default);
    }
    for value in policy.valid_values.iter().flatten() {
        put_quantity(buf, 3, value);
    }
    if let Some(range) = &policy.valid_range {
        put_message(buf, 4, |b| {
            put_quantity(b, 1, &range.min);
            if let Some(max) = &range.max {
                put_quantity(b, 2, max);
            }
            if let Some(step) = &range.step {
                put_quantity(b, 3, step);
            }
        });
    }
}

fn encode_consumption(buf: &mut Vec<u8>, consumption: &DeviceCounterConsumption) {
    put_str(buf, 1, &consumption.counter_set);
    put_map(buf, 2, Some(&consumption.counters), encode_counter);
    put_strings(buf, 3, consumption.compatibility_groups.as_ref());
}

fn encode_taint(buf: &mut Vec<u8>, taint: &DeviceTaint) {
    put_str(buf, 1, &taint.key);
    put_str(buf, 2, opt(taint.value.as_ref()));
    put_str(buf, 3, &taint.effect);
    if let Some(time) = &taint.time_added {
        encode_time(buf, 4, Some(time));
    }
}

fn encode_node_allocatable(buf: &mut Vec<u8>, resource: &NodeAllocatableResource) {
    if let Some(mapping) = &resource.mapping {
        put_message(buf, 3, |b| {
            if let Some(key) = &mapping.capacity_key {
                put_str(b, 1, key);
            }
            if let Some(multiplier) = &mapping.capacity_multiplier {
                put_quantity(b, 2, multiplier);
            }
            if let Some(multiplier) = &mapping.device_multiplier {
                put_quantity(b, 3, multiplier);
            }
        });
    }
    if let Some(overhead) = &resource.overhead {
        put_message(buf, 4, |b| {
            if let Some(per_pod) = &overhead.per_pod {
                put_quantity(b, 1, per_pod);
            }
            if let Some(per_container) = &overhead.per_container {
                put_quantity(b, 2, per_container);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use k8s_openapi::api::resource::v1::ResourcePool;

    /// Bytes written out by hand from generated.proto's numbers and gogo's rules, for the
    /// smallest slice: the Go-side test pins the full field set against k8s.io/api.
    #[test]
    fn a_minimal_slice_is_what_go_writes() {
        let slice = ResourceSlice {
            metadata: Default::default(),
            spec: ResourceSliceSpec {
                driver: "d".into(),
                pool: ResourcePool {
                    name: "p".into(),
                    generation: 1,
                    resource_slice_count: 1,
                },
                devices: Some(vec![Device {
                    name: "g".into(),
                    ..Device::default()
                }]),
                ..ResourceSliceSpec::default()
            },
        };
        let meta: Vec<u8> = [
            &[0x0a, 0, 0x12, 0, 0x1a, 0, 0x22, 0, 0x2a, 0, 0x32, 0][..],
            &[0x38, 0],     // generation
            &[0x42, 0][..], // zero creationTimestamp
        ]
        .concat();
        let pool = [0x0a, 1, b'p', 0x10, 1, 0x18, 1];
        let device = [0x0a, 1, b'g'];
        let mut spec = vec![0x0a, 1, b'd', 0x12, pool.len() as u8];
        spec.extend_from_slice(&pool);
        spec.extend_from_slice(&[0x32, device.len() as u8]);
        spec.extend_from_slice(&device);
        let mut expected = vec![0x0a, meta.len() as u8];
        expected.extend_from_slice(&meta);
        expected.extend_from_slice(&[0x12, spec.len() as u8]);
        expected.extend_from_slice(&spec);
        assert_eq!(encode_resource_slice(&slice), expected);
    }
}
