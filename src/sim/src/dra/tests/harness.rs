//! Test objects mirroring upstream's generators, and a runner mirroring
//! upstream's `RunTestAllocator`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, CELDeviceSelector, CapacityRequestPolicy, CapacityRequestPolicyRange,
    CapacityRequirements, Counter, CounterSet, Device, DeviceAllocationConfiguration,
    DeviceAllocationResult, DeviceAttribute, DeviceCapacity, DeviceClaim, DeviceClaimConfiguration,
    DeviceClass, DeviceClassConfiguration, DeviceClassSpec, DeviceConstraint,
    DeviceCounterConsumption, DeviceRequest, DeviceRequestAllocationResult, DeviceSelector,
    DeviceSubRequest, DeviceTaint, DeviceToleration, ExactDeviceRequest, OpaqueDeviceConfiguration,
    ResourceClaim, ResourceClaimSpec, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

use super::super::{
    AllocError, AllocateOutcome, AllocatedState, DeviceId, DraCatalog, ShareIdGenerator,
};
use crate::gates::FeatureGates;

pub const REGION1: &str = "region-1";
pub const REGION2: &str = "region-2";
pub const NODE1: &str = "node-1";
pub const NODE2: &str = "node-2";
pub const CLASS_A: &str = "class-a";
pub const CLASS_B: &str = "class-b";
pub const DRIVER_A: &str = "driver-a";
pub const DRIVER_B: &str = "driver-b";
pub const POOL1: &str = "pool-1";
pub const POOL2: &str = "pool-2";
pub const POOL3: &str = "pool-3";
pub const POOL4: &str = "pool-4";
pub const REQ0: &str = "req-0";
pub const REQ1: &str = "req-1";
pub const REQ2: &str = "req-2";
pub const SUB_REQ0: &str = "subReq-0";
pub const SUB_REQ1: &str = "subReq-1";
pub const REQ0_SUB_REQ0: &str = "req-0/subReq-0";
pub const REQ0_SUB_REQ1: &str = "req-0/subReq-1";
pub const REQ1_SUB_REQ0: &str = "req-1/subReq-0";
pub const REQ1_SUB_REQ1: &str = "req-1/subReq-1";
pub const REQ2_SUB_REQ1: &str = "req-2/subReq-1";
pub const CLAIM0: &str = "claim-0";
pub const CLAIM1: &str = "claim-1";
pub const SLICE1: &str = "slice-1";
pub const SLICE2: &str = "slice-2";
pub const SLICE3: &str = "slice-3";
pub const SLICE4: &str = "slice-4";
pub const DEVICE0: &str = "device-0";
pub const DEVICE1: &str = "device-1";
pub const DEVICE2: &str = "device-2";
pub const DEVICE3: &str = "device-3";
pub const COUNTER_SET1: &str = "counter-set-1";
pub const COUNTER_SET2: &str = "counter-set-2";
pub const CAPACITY0: &str = "capacity-0";
pub const CAPACITY1: &str = "capacity-1";
pub const REGION_KEY: &str = "region";
pub const PLANET_KEY: &str = "planet";
pub const FIELD_NAME_KEY: &str = "metadata.name";
pub const FIXED_SHARE_ID: &str = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa";

/// Upstream's `Features`, by name.
#[derive(Debug, Clone, Copy, Default)]
#[allow(clippy::struct_excessive_bools)]
pub struct Features {
    pub admin_access: bool,
    pub prioritized_list: bool,
    pub partitionable_devices: bool,
    pub device_taints: bool,
    pub consumable_capacity: bool,
    pub device_binding_and_status: bool,
    pub list_type_attributes: bool,
    /// `DRADeviceCompatibilityGroups` (experimental variant upstream).
    pub compatibility_groups: bool,
    pub fractional_capacity_range: bool,
    pub optional_node_operations: bool,
}

impl Features {
    /// Every gate off except the listed features, as upstream's tests run.
    pub fn gates(self) -> FeatureGates {
        let mut g = FeatureGates::default();
        for name in FeatureGates::NAMES {
            g.set(name, false).unwrap();
        }
        g.admin_access = self.admin_access;
        g.prioritized_list = self.prioritized_list;
        g.partitionable_devices = self.partitionable_devices;
        g.device_taints = self.device_taints;
        g.consumable_capacity = self.consumable_capacity;
        g.device_binding_conditions = self.device_binding_and_status;
        g.resource_claim_device_status = self.device_binding_and_status;
        g.list_type_attributes = self.list_type_attributes;
        g.device_compatibility_groups = self.compatibility_groups;
        g.fractional_capacity_range = self.fractional_capacity_range;
        g.optional_node_operations = self.optional_node_operations;
        g
    }
}

pub fn node(name: &str, region: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([
                (REGION_KEY.to_string(), region.to_string()),
                (PLANET_KEY.to_string(), "earth".to_string()),
            ])),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn cel(expression: &str) -> DeviceSelector {
    DeviceSelector {
        cel: Some(CELDeviceSelector {
            expression: expression.into(),
        }),
    }
}

/// `device.capacity["<driver>"].memory.compareTo(quantity("<q>")) >= 0`.
pub fn memory_at_least(driver: &str, q: &str) -> DeviceSelector {
    cel(&format!(
        r#"device.capacity["{driver}"].memory.compareTo(quantity("{q}")) >= 0"#
    ))
}

pub fn class(name: &str, driver: &str) -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(DeviceClassSpec {
            selectors: Some(vec![cel(&format!(r#"device.driver == "{driver}""#))]),
            ..Default::default()
        }),
    }
}

pub fn class_with_allow_multiple_allocations(name: &str, driver: &str, multi: bool) -> DeviceClass {
    let mut c = class(name, driver);
    if let Some(spec) = c.spec.as_mut() {
        spec.selectors = Some(vec![cel(&format!(
            r#"device.driver == "{driver}" && device.allowMultipleAllocations == {multi}"#
        ))]);
    }
    c
}

pub fn device_configuration(driver: &str, attribute: &str) -> OpaqueDeviceConfiguration {
    OpaqueDeviceConfiguration {
        driver: driver.into(),
        parameters: RawExtension(serde_json::json!({ attribute: format!("{attribute}Value") })),
    }
}

pub fn class_with_config(name: &str, driver: &str, attribute: &str) -> DeviceClass {
    let mut c = class(name, driver);
    if let Some(spec) = c.spec.as_mut() {
        spec.config = Some(vec![DeviceClassConfiguration {
            opaque: Some(device_configuration(driver, attribute)),
        }]);
    }
    c
}

pub fn request(name: &str, class: &str, count: i64) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        exactly: Some(ExactDeviceRequest {
            count: Some(count),
            allocation_mode: Some("ExactCount".into()),
            device_class_name: class.into(),
            ..Default::default()
        }),
        first_available: None,
    }
}

pub fn request_with(
    name: &str,
    class: &str,
    count: i64,
    selectors: Vec<DeviceSelector>,
) -> DeviceRequest {
    let mut r = request(name, class, count);
    if let Some(e) = r.exactly.as_mut() {
        e.selectors = Some(selectors);
    }
    r
}

pub fn all_request(name: &str, class: &str) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        exactly: Some(ExactDeviceRequest {
            allocation_mode: Some("All".into()),
            device_class_name: class.into(),
            ..Default::default()
        }),
        first_available: None,
    }
}

pub fn sub_request(name: &str, class: &str, count: i64) -> DeviceSubRequest {
    DeviceSubRequest {
        name: name.into(),
        count: Some(count),
        allocation_mode: Some("ExactCount".into()),
        device_class_name: class.into(),
        ..Default::default()
    }
}

pub fn sub_request_with(
    name: &str,
    class: &str,
    count: i64,
    selector: DeviceSelector,
) -> DeviceSubRequest {
    let mut s = sub_request(name, class, count);
    s.selectors = Some(vec![selector]);
    s
}

pub fn all_sub_request(name: &str, class: &str) -> DeviceSubRequest {
    let mut s = sub_request(name, class, 0);
    s.allocation_mode = Some("All".into());
    s
}

pub fn prioritized(name: &str, subs: Vec<DeviceSubRequest>) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        exactly: None,
        first_available: Some(subs),
    }
}

pub fn with_capacity_request(mut r: DeviceRequest, q: Option<&str>) -> DeviceRequest {
    if let Some(e) = r.exactly.as_mut() {
        e.capacity = Some(capacity_requests(q));
    }
    r
}

pub fn sub_with_capacity_request(mut s: DeviceSubRequest, q: Option<&str>) -> DeviceSubRequest {
    s.capacity = Some(capacity_requests(q));
    s
}

pub fn capacity_requests(q: Option<&str>) -> CapacityRequirements {
    CapacityRequirements {
        requests: Some(
            q.map(|q| (CAPACITY0.to_string(), Quantity(q.into())))
                .into_iter()
                .collect(),
        ),
    }
}

pub fn claim(
    name: &str,
    constraints: Vec<DeviceConstraint>,
    requests: Vec<DeviceRequest>,
) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                constraints: (!constraints.is_empty()).then_some(constraints),
                config: None,
            }),
        }),
        status: None,
    }
}

pub fn claim_with_request(name: &str, req: &str, class: &str) -> ResourceClaim {
    claim(name, vec![], vec![request(req, class, 1)])
}

pub fn with_configs(mut c: ResourceClaim, configs: Vec<DeviceClaimConfiguration>) -> ResourceClaim {
    if let Some(d) = c.spec.as_mut().and_then(|s| s.devices.as_mut()) {
        d.config = Some(configs);
    }
    c
}

pub fn with_tolerations(mut c: ResourceClaim, tolerations: &[DeviceToleration]) -> ResourceClaim {
    for r in c
        .spec
        .as_mut()
        .and_then(|s| s.devices.as_mut())
        .and_then(|d| d.requests.as_mut())
        .into_iter()
        .flatten()
    {
        if let Some(e) = r.exactly.as_mut() {
            e.tolerations
                .get_or_insert_with(Vec::new)
                .extend_from_slice(tolerations);
        }
    }
    c
}

/// Edits the first request's `exactly`.
pub fn edit_exact(mut c: ResourceClaim, f: impl FnOnce(&mut ExactDeviceRequest)) -> ResourceClaim {
    if let Some(e) = c
        .spec
        .as_mut()
        .and_then(|s| s.devices.as_mut())
        .and_then(|d| d.requests.as_mut())
        .and_then(|r| r.first_mut())
        .and_then(|r| r.exactly.as_mut())
    {
        f(e);
    }
    c
}

pub fn claim_config(
    requests: &[&str],
    config: OpaqueDeviceConfiguration,
) -> DeviceClaimConfiguration {
    DeviceClaimConfiguration {
        requests: (!requests.is_empty())
            .then(|| requests.iter().map(|r| (*r).to_string()).collect()),
        opaque: Some(config),
    }
}

pub fn match_attribute(requests: &[&str], attribute: &str) -> DeviceConstraint {
    DeviceConstraint {
        requests: (!requests.is_empty())
            .then(|| requests.iter().map(|r| (*r).to_string()).collect()),
        match_attribute: Some(attribute.into()),
        distinct_attribute: None,
    }
}

pub fn distinct_attribute(requests: &[&str], attribute: &str) -> DeviceConstraint {
    DeviceConstraint {
        requests: (!requests.is_empty())
            .then(|| requests.iter().map(|r| (*r).to_string()).collect()),
        match_attribute: None,
        distinct_attribute: Some(attribute.into()),
    }
}

pub fn q(s: &str) -> Quantity {
    Quantity(s.into())
}

pub fn string_attr(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(v.into()),
        ..Default::default()
    }
}

pub fn int_attr(v: i64) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(v),
        ..Default::default()
    }
}

pub fn bool_attr(v: bool) -> DeviceAttribute {
    DeviceAttribute {
        bool: Some(v),
        ..Default::default()
    }
}

pub fn version_attr(v: &str) -> DeviceAttribute {
    DeviceAttribute {
        version: Some(v.into()),
        ..Default::default()
    }
}

pub fn strings_attr(v: &[&str]) -> DeviceAttribute {
    DeviceAttribute {
        strings: Some(v.iter().map(|s| (*s).to_string()).collect()),
        ..Default::default()
    }
}

pub fn ints_attr(v: &[i64]) -> DeviceAttribute {
    DeviceAttribute {
        ints: Some(v.to_vec()),
        ..Default::default()
    }
}

pub fn bools_attr(v: &[bool]) -> DeviceAttribute {
    DeviceAttribute {
        bools: Some(v.to_vec()),
        ..Default::default()
    }
}

pub fn versions_attr(v: &[&str]) -> DeviceAttribute {
    DeviceAttribute {
        versions: Some(v.iter().map(|s| (*s).to_string()).collect()),
        ..Default::default()
    }
}

/// A device builder (upstream `device(...)` and its `with*` methods).
#[derive(Debug, Clone)]
pub struct Dev(pub Device);

pub fn device(name: &str) -> Dev {
    Dev(Device {
        name: name.into(),
        ..Default::default()
    })
}

impl Dev {
    pub fn capacity(mut self, caps: &[(&str, &str)]) -> Self {
        let map = self.0.capacity.get_or_insert_with(BTreeMap::new);
        for (name, value) in caps {
            map.insert(
                (*name).to_string(),
                DeviceCapacity {
                    value: q(value),
                    request_policy: None,
                },
            );
        }
        self
    }

    pub fn attrs(mut self, attrs: &[(&str, DeviceAttribute)]) -> Self {
        let map = self.0.attributes.get_or_insert_with(BTreeMap::new);
        for (name, value) in attrs {
            map.insert((*name).to_string(), value.clone());
        }
        self
    }

    pub fn taints(mut self, taints: &[DeviceTaint]) -> Self {
        self.0
            .taints
            .get_or_insert_with(Vec::new)
            .extend_from_slice(taints);
        self
    }

    /// `withDeviceCounterConsumption`; with `from_counters` the device's
    /// capacity mirrors the consumed counters (upstream's `fromCounters`).
    /// Sets `compatibilityGroups` on the most recent `consumes` entry.
    pub fn groups(mut self, groups: &[&str]) -> Self {
        if let Some(last) = self.0.consumes_counters.as_mut().and_then(|c| c.last_mut()) {
            last.compatibility_groups = Some(groups.iter().map(|g| (*g).to_string()).collect());
        }
        self
    }

    pub fn consumes(mut self, set: &str, counters: &[(&str, &str)], from_counters: bool) -> Self {
        self.0
            .consumes_counters
            .get_or_insert_with(Vec::new)
            .push(DeviceCounterConsumption {
                counter_set: set.into(),
                counters: counters
                    .iter()
                    .map(|(n, v)| ((*n).to_string(), Counter { value: q(v) }))
                    .collect(),
                compatibility_groups: None,
            });
        if from_counters {
            let map = self.0.capacity.get_or_insert_with(BTreeMap::new);
            for (name, value) in counters {
                map.insert(
                    (*name).to_string(),
                    DeviceCapacity {
                        value: q(value),
                        request_policy: None,
                    },
                );
            }
        }
        self
    }

    pub fn on_node(mut self, node: &str) -> Self {
        self.0.node_name = Some(node.into());
        self
    }

    pub fn on_all_nodes(mut self) -> Self {
        self.0.all_nodes = Some(true);
        self
    }

    pub fn on_selected_nodes(mut self, selector: NodeSelector) -> Self {
        self.0.node_selector = Some(selector);
        self
    }

    pub fn binding_conditions(mut self, conditions: &[&str], failure: &[&str]) -> Self {
        let list =
            |v: &[&str]| (!v.is_empty()).then(|| v.iter().map(|s| (*s).to_string()).collect());
        self.0.binding_conditions = list(conditions);
        self.0.binding_failure_conditions = list(failure);
        self
    }

    pub fn binds_to_node(mut self, binds: bool) -> Self {
        self.0.binds_to_node = Some(binds);
        self
    }

    pub fn multi(mut self) -> Self {
        self.0.allow_multiple_allocations = Some(true);
        self
    }

    /// `withCapacityRequestPolicyRange`: default 2, range [2, 4] step 2.
    pub fn policy_range(mut self, caps: &[(&str, &str)]) -> Self {
        let map = self.0.capacity.get_or_insert_with(BTreeMap::new);
        for (name, value) in caps {
            map.insert(
                (*name).to_string(),
                DeviceCapacity {
                    value: q(value),
                    request_policy: Some(CapacityRequestPolicy {
                        default: Some(q("2")),
                        valid_range: Some(CapacityRequestPolicyRange {
                            min: q("2"),
                            step: Some(q("2")),
                            max: Some(q("4")),
                        }),
                        valid_values: None,
                    }),
                },
            );
        }
        self
    }

    /// `withFractionalCapacityRequestPolicyRange`: default 200m, min 200m,
    /// step 100m, max 1.
    pub fn policy_range_fractional(mut self, caps: &[(&str, &str)]) -> Self {
        let map = self.0.capacity.get_or_insert_with(BTreeMap::new);
        for (name, value) in caps {
            map.insert(
                (*name).to_string(),
                DeviceCapacity {
                    value: q(value),
                    request_policy: Some(CapacityRequestPolicy {
                        default: Some(q("200m")),
                        valid_range: Some(CapacityRequestPolicyRange {
                            min: q("200m"),
                            step: Some(q("100m")),
                            max: Some(q("1")),
                        }),
                        valid_values: None,
                    }),
                },
            );
        }
        self
    }

    /// `withCapacityRequestPolicyValidValues`: the default is the first valid value.
    pub fn policy_values(mut self, default: &str, caps: &[(&str, &str)], more: &[&str]) -> Self {
        let map = self.0.capacity.get_or_insert_with(BTreeMap::new);
        for (name, value) in caps {
            let mut values = vec![q(default)];
            values.extend(more.iter().map(|v| q(v)));
            map.insert(
                (*name).to_string(),
                DeviceCapacity {
                    value: q(value),
                    request_policy: Some(CapacityRequestPolicy {
                        default: Some(q(default)),
                        valid_values: Some(values),
                        valid_range: None,
                    }),
                },
            );
        }
        self
    }
}

/// How a slice selects nodes (upstream's `nodeSelection` argument).
#[derive(Debug, Clone)]
pub enum Sel {
    Node(&'static str),
    All,
    PerDevice,
    Selector(NodeSelector),
}

/// A pool: name, slice count and generation.
#[derive(Debug, Clone)]
pub struct PoolSpec(pub &'static str, pub i64, pub i64);

/// Upstream passes a bare pool name for a one-slice pool.
pub fn pool(name: &'static str) -> PoolSpec {
    PoolSpec(name, 1, 1)
}

/// `resourcePool(name, count)`.
pub fn resource_pool(name: &'static str, count: i64) -> PoolSpec {
    PoolSpec(name, count, 1)
}

pub fn slice(
    name: &str,
    sel: Sel,
    pool: PoolSpec,
    driver: &str,
    devices: Vec<Dev>,
) -> ResourceSlice {
    let mut spec = ResourceSliceSpec {
        driver: driver.into(),
        pool: ResourcePool {
            name: pool.0.into(),
            resource_slice_count: pool.1,
            generation: pool.2,
        },
        devices: (!devices.is_empty()).then(|| devices.into_iter().map(|d| d.0).collect()),
        ..Default::default()
    };
    match sel {
        Sel::Node(n) => spec.node_name = Some(n.into()),
        Sel::All => spec.all_nodes = Some(true),
        Sel::PerDevice => spec.per_device_node_selection = Some(true),
        Sel::Selector(s) => spec.node_selector = Some(s),
    }
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec,
    }
}

pub fn slice_with_one_device(name: &str, sel: Sel, pool: PoolSpec, driver: &str) -> ResourceSlice {
    slice(name, sel, pool, driver, vec![device(DEVICE1)])
}

pub fn slice_with_multiple_devices(
    name: &str,
    sel: Sel,
    pool: PoolSpec,
    driver: &str,
    count: usize,
) -> ResourceSlice {
    slice(
        name,
        sel,
        pool,
        driver,
        (0..count).map(|i| device(&format!("device-{i}"))).collect(),
    )
}

pub fn counter_slice(
    name: &str,
    sel: Sel,
    pool: PoolSpec,
    driver: &str,
    sets: Vec<CounterSet>,
) -> ResourceSlice {
    let mut s = slice(name, sel, pool, driver, vec![]);
    s.spec.shared_counters = Some(sets);
    s
}

pub fn counter_set(name: &str, counters: &[(&str, &str)]) -> CounterSet {
    CounterSet {
        name: name.into(),
        counters: counters
            .iter()
            .map(|(n, v)| ((*n).to_string(), Counter { value: q(v) }))
            .collect(),
    }
}

pub fn taint(key: &str, value: &str, effect: &str) -> DeviceTaint {
    DeviceTaint {
        key: key.into(),
        value: Some(value.into()),
        effect: effect.into(),
        time_added: None,
    }
}

pub fn toleration(op: &str, key: &str, value: &str, effect: &str) -> DeviceToleration {
    DeviceToleration {
        operator: Some(op.into()),
        key: Some(key.into()),
        value: (!value.is_empty()).then(|| value.into()),
        effect: Some(effect.into()),
        toleration_seconds: None,
    }
}

pub fn taint_none() -> DeviceTaint {
    taint("taint-key", "taint-value", "None")
}
pub fn taint_no_schedule() -> DeviceTaint {
    taint("taint-key", "taint-value", "NoSchedule")
}
pub fn taint_no_execute() -> DeviceTaint {
    taint("taint-key", "taint-value-2", "NoExecute")
}
pub fn toleration_no_schedule() -> DeviceToleration {
    toleration("Exists", "taint-key", "", "NoSchedule")
}
pub fn toleration_no_execute() -> DeviceToleration {
    toleration("Equal", "taint-key", "taint-value-2", "NoExecute")
}

pub fn label_selector(key: &str, values: &[&str]) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: "In".into(),
                values: Some(values.iter().map(|v| (*v).to_string()).collect()),
            }]),
            match_fields: None,
        }],
    }
}

pub fn local_selector(node: &str) -> NodeSelector {
    NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: FIELD_NAME_KEY.into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
        }],
    }
}

pub fn res(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
    admin: bool,
) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request: request.into(),
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
        admin_access: admin.then_some(true),
        ..Default::default()
    }
}

pub fn res_tolerating(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
    tolerations: Vec<DeviceToleration>,
) -> DeviceRequestAllocationResult {
    let mut r = res(request, driver, pool, device, false);
    r.tolerations = Some(tolerations);
    r
}

/// `withConsumedCapacity(&fixedShareID, ...)`.
pub fn res_shared(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
    consumed: &[(&str, &str)],
) -> DeviceRequestAllocationResult {
    let mut r = res(request, driver, pool, device, false);
    r.share_id = Some(FIXED_SHARE_ID.into());
    r.consumed_capacity = (!consumed.is_empty()).then(|| {
        consumed
            .iter()
            .map(|(n, v)| ((*n).to_string(), q(v)))
            .collect()
    });
    r
}

pub fn res_binding(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
    conditions: &[&str],
    failure: &[&str],
) -> DeviceRequestAllocationResult {
    let mut r = res(request, driver, pool, device, false);
    let list = |v: &[&str]| (!v.is_empty()).then(|| v.iter().map(|s| (*s).to_string()).collect());
    r.binding_conditions = list(conditions);
    r.binding_failure_conditions = list(failure);
    r
}

pub fn multiple_results(
    request: &str,
    driver: &str,
    pool: &str,
    count: usize,
    start: usize,
) -> Vec<DeviceRequestAllocationResult> {
    (start..start + count)
        .map(|i| res(request, driver, pool, &format!("device-{i}"), false))
        .collect()
}

/// `allocationResult`: results in any order, no config.
pub fn alloc(
    selector: Option<NodeSelector>,
    results: Vec<DeviceRequestAllocationResult>,
) -> AllocationResult {
    alloc_with_configs(selector, results, vec![])
}

/// `allocationResultWithConfigs`.
pub fn alloc_with_configs(
    selector: Option<NodeSelector>,
    results: Vec<DeviceRequestAllocationResult>,
    configs: Vec<DeviceAllocationConfiguration>,
) -> AllocationResult {
    AllocationResult {
        allocation_timestamp: None,
        devices: Some(DeviceAllocationResult {
            results: Some(results),
            config: (!configs.is_empty()).then_some(configs),
        }),
        node_selector: selector,
    }
}

pub fn config(
    source: &str,
    requests: &[&str],
    opaque: OpaqueDeviceConfiguration,
) -> DeviceAllocationConfiguration {
    DeviceAllocationConfiguration {
        source: source.into(),
        requests: (!requests.is_empty())
            .then(|| requests.iter().map(|r| (*r).to_string()).collect()),
        opaque: Some(opaque),
    }
}

/// What a case expects.
#[derive(Debug, Clone)]
pub enum Expect {
    /// These allocations, one per claim.
    Results(Vec<AllocationResult>),
    /// No fit and no error (upstream: nil results, nil error).
    NoFit,
    /// A fatal error containing this text.
    Error(&'static str),
    /// A node-specific failure containing this text.
    FailedOnNode(&'static str),
}

/// An existing share: device, share ID and consumed capacity by name.
pub type Share = (DeviceId, &'static str, Vec<(&'static str, &'static str)>);

/// One upstream test case.
#[derive(Debug, Clone)]
pub struct Case {
    pub features: Features,
    pub claims: Vec<ResourceClaim>,
    pub allocated: Vec<DeviceId>,
    /// Existing shares: device, share ID and consumed capacity.
    pub allocated_shares: Vec<Share>,
    pub classes: Vec<DeviceClass>,
    pub slices: Vec<ResourceSlice>,
    pub node: Node,
    pub expect: Expect,
    /// Upstream's `expectNumAllocateOneInvocations` (incubating value).
    pub invocations: Option<u64>,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            features: Features::default(),
            claims: vec![],
            allocated: vec![],
            allocated_shares: vec![],
            classes: vec![],
            slices: vec![],
            node: node(NODE1, REGION1),
            expect: Expect::NoFit,
            invocations: None,
        }
    }
}

pub fn id(driver: &str, pool: &str, device: &str) -> DeviceId {
    DeviceId::new(driver, pool, device)
}

fn normalize_selector(a: &mut AllocationResult) {
    let Some(selector) = a.node_selector.as_mut() else {
        return;
    };
    for term in &mut selector.node_selector_terms {
        for list in [term.match_expressions.as_mut(), term.match_fields.as_mut()]
            .into_iter()
            .flatten()
        {
            for r in list.iter_mut() {
                if let Some(v) = r.values.as_mut() {
                    v.sort();
                }
            }
            list.sort_by(|x, y| {
                (&x.key, &x.operator, &x.values).cmp(&(&y.key, &y.operator, &y.values))
            });
        }
    }
}

impl Case {
    pub fn state(&self) -> AllocatedState {
        let gates = self.features.gates();
        let mut state = AllocatedState::default();
        for d in &self.allocated {
            state.mark_allocated(d);
        }
        for (d, share, consumed) in &self.allocated_shares {
            let result = DeviceRequestAllocationResult {
                request: "existing".into(),
                driver: d.driver.clone(),
                pool: d.pool.clone(),
                device: d.device.clone(),
                share_id: Some((*share).into()),
                consumed_capacity: (!consumed.is_empty()).then(|| {
                    consumed
                        .iter()
                        .map(|(n, v)| ((*n).to_string(), q(v)))
                        .collect()
                }),
                ..Default::default()
            };
            state.add_allocation(
                &AllocationResult {
                    devices: Some(DeviceAllocationResult {
                        results: Some(vec![result]),
                        config: None,
                    }),
                    ..Default::default()
                },
                &gates,
            );
        }
        state
    }

    /// Runs the case once on a fresh catalog and returns the raw outcome.
    pub fn outcome(&self) -> (Result<AllocateOutcome, AllocError>, DraCatalog) {
        let gates = self.features.gates();
        let mut catalog = DraCatalog::new(gates, &self.classes, &self.slices, &[]);
        let claims: Vec<&ResourceClaim> = self.claims.iter().collect();
        let mut share_ids = ShareIdGenerator::default();
        let out = catalog.allocate(&self.node, &claims, &self.state(), &mut share_ids);
        (out, catalog)
    }

    /// Runs the case and checks upstream's expectation; also runs it a second
    /// time on the same catalog to prove the caches change nothing.
    ///
    /// Where the case pins upstream's search work (`invocations`), the search
    /// runs once more without the counting that may answer before it: the
    /// search must do exactly upstream's work, and counting at most that.
    pub fn run(self, name: &str) {
        let (first, mut catalog) = self.outcome();
        self.check(name, first);
        if let Some(expected) = self.invocations {
            assert!(
                catalog.stats().allocate_one_invocations <= expected,
                "{name}: allocateOne invocations {} with counting first, upstream {expected}",
                catalog.stats().allocate_one_invocations
            );
            let gates = self.features.gates();
            let mut searching = DraCatalog::new(gates, &self.classes, &self.slices, &[]);
            searching.set_count_first(false);
            let claims: Vec<&ResourceClaim> = self.claims.iter().collect();
            let out = searching.allocate(
                &self.node,
                &claims,
                &self.state(),
                &mut ShareIdGenerator::default(),
            );
            self.check(name, out);
            assert_eq!(
                searching.stats().allocate_one_invocations,
                expected,
                "{name}: allocateOne invocations"
            );
        }
        let claims: Vec<&ResourceClaim> = self.claims.iter().collect();
        let second = catalog.allocate(
            &self.node,
            &claims,
            &self.state(),
            &mut ShareIdGenerator::default(),
        );
        self.check(&format!("{name} (cached)"), second);
    }

    fn check(&self, name: &str, got: Result<AllocateOutcome, AllocError>) {
        match (&self.expect, got) {
            (Expect::Results(expected), Ok(AllocateOutcome::Allocated(mut results))) => {
                for r in &mut results {
                    for d in r
                        .devices
                        .iter_mut()
                        .flat_map(|d| d.results.iter_mut().flatten())
                    {
                        if d.share_id.is_some() {
                            d.share_id = Some(FIXED_SHARE_ID.into());
                        }
                    }
                    normalize_selector(r);
                }
                let mut expected = expected.clone();
                for r in &mut expected {
                    normalize_selector(r);
                }
                assert_eq!(results, expected, "{name}");
            }
            (Expect::NoFit, Ok(AllocateOutcome::Unschedulable { reasons })) => {
                assert!(!reasons.is_empty(), "{name}: no reasons given");
                for r in &reasons {
                    assert_eq!(
                        r.code,
                        crate::reason::Code::CannotAllocateAllClaims,
                        "{name}: {r}"
                    );
                    assert!(
                        r.to_string().starts_with("cannot allocate all claims: "),
                        "{name}: {r}"
                    );
                }
            }
            (Expect::Error(text), Err(AllocError::Fatal(message))) => {
                assert!(
                    message.contains(text),
                    "{name}: error {message:?} lacks {text:?}"
                );
            }
            (Expect::FailedOnNode(text), Err(AllocError::FailedOnNode(message))) => {
                assert!(
                    message.contains(text),
                    "{name}: error {message:?} lacks {text:?}"
                );
            }
            (expect, got) => panic!("{name}: expected {expect:?}, got {got:?}"),
        }
    }
}
