//! ResourceSlices as the allocator reads them: converted once, when a slice
//! enters the catalog, into entries with parsed quantities, parsed node
//! selectors and the effective taints (the driver's plus DeviceTaintRules').
//!
//! Slices are immutable once published (a driver replaces them), so nothing
//! here changes after conversion; per-device caches live elsewhere, keyed by
//! the device's cache slot.

use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::api::resource::v1::{Device, DeviceTaint, DeviceTaintRule, ResourceSlice};

use super::quantity::{Amount, Value};
use crate::selectors::{NodeSelectorError, ParsedNodeSelector};

/// A node selector with its parse result.
#[derive(Debug, Clone)]
pub(crate) struct NodeSel {
    pub raw: NodeSelector,
    pub parsed: Result<ParsedNodeSelector, NodeSelectorError>,
}

impl NodeSel {
    fn new(raw: &NodeSelector) -> Self {
        NodeSel {
            raw: raw.clone(),
            parsed: ParsedNodeSelector::parse(raw),
        }
    }
}

/// One named counter set with its counters, sorted by name.
#[derive(Debug, Clone)]
pub(crate) struct CounterSetEntry {
    pub name: String,
    pub counters: Vec<(String, Amount)>,
}

/// One `consumesCounters` entry.
#[derive(Debug, Clone)]
pub(crate) struct Consumption {
    pub counter_set: String,
    pub counters: Vec<(String, Amount)>,
    /// `compatibilityGroups` (KEP-5963); empty when none are declared.
    pub groups: Vec<String>,
}

/// A capacity's request policy.
#[derive(Debug, Clone)]
pub(crate) struct Policy {
    pub default: Option<Value>,
    pub valid_values: Option<Vec<Value>>,
    pub valid_range: Option<Range>,
}

/// `validRange`.
#[derive(Debug, Clone)]
pub(crate) struct Range {
    pub min: Value,
    pub max: Option<Value>,
    pub step: Option<Value>,
}

/// One capacity of a device.
#[derive(Debug, Clone)]
pub(crate) struct CapacityEntry {
    pub name: String,
    pub value: Value,
    pub policy: Option<Policy>,
}

/// A taint as the allocator matches it.
#[derive(Debug, Clone)]
pub(crate) struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// One device of a slice.
#[derive(Debug)]
pub(crate) struct DeviceEntry {
    pub name: String,
    /// The device as published (rule taints appended); CEL and constraints
    /// read its attributes, results copy its binding conditions.
    pub raw: Device,
    /// Index of this device's cache entry in the catalog.
    pub slot: u32,
    /// Sorted by name, as the API's map is.
    pub capacities: Vec<CapacityEntry>,
    pub consumes: Vec<Consumption>,
    pub taints: Vec<Taint>,
    pub allow_multi: bool,
    pub binds_to_node: bool,
    /// `len(bindingConditions) > 0`.
    pub has_binding_conditions: bool,
    /// `bindingConditions != nil`, which upstream uses to order pools.
    pub binding_conditions_set: bool,
    pub node_name: Option<String>,
    pub all_nodes: bool,
    pub node_selector: Option<NodeSel>,
}

/// One ResourceSlice.
#[derive(Debug)]
pub(crate) struct SliceEntry {
    pub name: String,
    pub driver: String,
    pub pool: String,
    pub generation: i64,
    pub slice_count: i64,
    /// `spec.nodeName` exactly as set (upstream distinguishes unset from "").
    pub node_name: Option<String>,
    pub all_nodes: bool,
    pub node_selector: Option<NodeSel>,
    /// As set; with partitionable devices off, any value makes upstream ignore
    /// the slice.
    pub per_device_node_selection: Option<bool>,
    /// `skipNodeOperations`, copied into results with DRAOptionalNodeOperations.
    pub skip_node_operations: Vec<String>,
    pub shared_counters: Vec<CounterSetEntry>,
    pub devices: Vec<DeviceEntry>,
    /// A quantity in the slice that does not parse; the pool is then treated
    /// as invalid (an API server would never have stored it).
    pub defect: Option<String>,
    /// What the conversion leaves out, to hand the slice back as given.
    pub given: GivenSlice,
}

/// What a [`SliceEntry`] does not keep of its slice: with the devices' `raw`, the slice
/// as it was given, for a caller that reads the slices again after the catalog (the
/// scale-down analysis after the plan) without a copy of every device (issue #28).
#[derive(Debug)]
pub(crate) struct GivenSlice {
    /// The slice without its devices (`spec.devices` taken out).
    shell: ResourceSlice,
    /// Whether `spec.devices` was set (an empty list is not an unset one).
    had_devices: bool,
    /// Devices whose taints DeviceTaintRules extended: the device's index and how many
    /// taints it had before (`None`: the field was unset).
    ruled: Vec<(usize, Option<usize>)>,
}

impl SliceEntry {
    /// The slice as it was given to [`convert_slice`].
    pub fn into_given(self) -> ResourceSlice {
        let devices = self.devices.into_iter().map(|d| d.raw);
        self.given.restore(devices)
    }

    /// [`SliceEntry::into_given`] of an entry still shared: its devices are copied.
    pub fn given_copy(&self) -> ResourceSlice {
        let devices = self.devices.iter().map(|d| d.raw.clone());
        GivenSlice {
            shell: self.given.shell.clone(),
            had_devices: self.given.had_devices,
            ruled: self.given.ruled.clone(),
        }
        .restore(devices)
    }
}

impl GivenSlice {
    /// The shell with `devices` put back, the taints the rules appended taken off.
    fn restore(self, devices: impl Iterator<Item = Device>) -> ResourceSlice {
        let mut slice = self.shell;
        if self.had_devices {
            let mut devices: Vec<Device> = devices.collect();
            for (index, before) in self.ruled {
                let Some(device) = devices.get_mut(index) else {
                    continue;
                };
                match before {
                    Some(len) => {
                        if let Some(taints) = device.taints.as_mut() {
                            taints.truncate(len);
                        }
                    }
                    None => device.taints = None,
                }
            }
            slice.spec.devices = Some(devices);
        }
        slice
    }
}

impl SliceEntry {
    /// The node name used to index the slice: set and non-empty.
    pub fn index_node_name(&self) -> Option<&str> {
        self.node_name.as_deref().filter(|n| !n.is_empty())
    }

    /// `perDeviceNodeSelection: true`.
    pub fn per_device(&self) -> bool {
        self.per_device_node_selection == Some(true)
    }
}

/// Converts a slice; `next_slot` hands out cache slots for its devices. The slice is
/// taken by value so that its devices move into the entries instead of being copied:
/// a cluster's devices are most of its slices' bytes (380 MB at 100,000 nodes with
/// 80,000 GPUs, issue #28).
pub(crate) fn convert_slice(
    mut slice: ResourceSlice,
    rules: &[DeviceTaintRule],
    apply_rules: bool,
    mut next_slot: impl FnMut() -> u32,
) -> SliceEntry {
    let devices = slice.spec.devices.take();
    let had_devices = devices.is_some();
    let mut ruled = Vec::new();
    let spec = &slice.spec;
    let mut defect = None;
    let mut note = |what: String| {
        if defect.is_none() {
            defect = Some(what);
        }
    };
    let shared_counters = spec
        .shared_counters
        .iter()
        .flatten()
        .map(|set| CounterSetEntry {
            name: set.name.clone(),
            counters: set
                .counters
                .iter()
                .map(|(name, counter)| {
                    let amount = Value::from_quantity(&counter.value)
                        .map(|v| v.amount)
                        .unwrap_or_else(|e| {
                            note(format!("counter set {} counter {name}: {e}", set.name));
                            Amount::ZERO
                        });
                    (name.clone(), amount)
                })
                .collect(),
        })
        .collect();
    let devices = devices
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(index, mut raw)| {
            if apply_rules {
                let before = raw.taints.as_ref().map(Vec::len);
                append_rule_taints(&mut raw, &spec.driver, &spec.pool.name, rules);
                if raw.taints.as_ref().map(Vec::len) != before {
                    ruled.push((index, before));
                }
            }
            convert_device(raw, next_slot(), &mut note)
        })
        .collect();
    SliceEntry {
        name: slice.metadata.name.clone().unwrap_or_default(),
        driver: spec.driver.clone(),
        pool: spec.pool.name.clone(),
        generation: spec.pool.generation,
        slice_count: spec.pool.resource_slice_count,
        node_name: spec.node_name.clone(),
        all_nodes: spec.all_nodes == Some(true),
        node_selector: spec.node_selector.as_ref().map(NodeSel::new),
        per_device_node_selection: spec.per_device_node_selection,
        skip_node_operations: spec.skip_node_operations.clone().unwrap_or_default(),
        shared_counters,
        devices,
        defect,
        given: GivenSlice {
            shell: slice,
            had_devices,
            ruled,
        },
    }
}

/// The scheduler's slice tracker appends each matching rule's taint to the
/// device; a rule without a selector, or with an empty one, matches all.
fn append_rule_taints(device: &mut Device, driver: &str, pool: &str, rules: &[DeviceTaintRule]) {
    for rule in rules {
        if let Some(selector) = &rule.spec.device_selector
            && (selector.driver.as_deref().is_some_and(|d| d != driver)
                || selector.pool.as_deref().is_some_and(|p| p != pool)
                || selector.device.as_deref().is_some_and(|d| d != device.name))
        {
            continue;
        }
        let taint = &rule.spec.taint;
        device
            .taints
            .get_or_insert_with(Vec::new)
            .push(DeviceTaint {
                key: taint.key.clone(),
                value: taint.value.clone(),
                effect: taint.effect.clone(),
                time_added: taint.time_added.clone(),
            });
    }
}

fn convert_device(raw: Device, slot: u32, note: &mut impl FnMut(String)) -> DeviceEntry {
    let name = raw.name.clone();
    let mut parse = |what: &str, q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity| {
        Value::from_quantity(q).unwrap_or_else(|e| {
            note(format!("device {name}: {what}: {e}"));
            Value::default()
        })
    };
    let capacities = raw
        .capacity
        .iter()
        .flatten()
        .map(|(cap_name, cap)| CapacityEntry {
            name: cap_name.clone(),
            value: parse(&format!("capacity {cap_name}"), &cap.value),
            policy: cap.request_policy.as_ref().map(|p| Policy {
                default: p
                    .default
                    .as_ref()
                    .map(|q| parse(&format!("capacity {cap_name} default"), q)),
                valid_values: p.valid_values.as_ref().map(|vs| {
                    vs.iter()
                        .map(|q| parse(&format!("capacity {cap_name} validValues"), q))
                        .collect()
                }),
                valid_range: p.valid_range.as_ref().map(|r| Range {
                    min: parse(&format!("capacity {cap_name} validRange.min"), &r.min),
                    max: r
                        .max
                        .as_ref()
                        .map(|q| parse(&format!("capacity {cap_name} validRange.max"), q)),
                    step: r
                        .step
                        .as_ref()
                        .map(|q| parse(&format!("capacity {cap_name} validRange.step"), q)),
                }),
            }),
        })
        .collect();
    let consumes = raw
        .consumes_counters
        .iter()
        .flatten()
        .map(|c| Consumption {
            counter_set: c.counter_set.clone(),
            counters: c
                .counters
                .iter()
                .map(|(counter, v)| {
                    (
                        counter.clone(),
                        parse(&format!("counter {} {counter}", c.counter_set), &v.value).amount,
                    )
                })
                .collect(),
            groups: c.compatibility_groups.clone().unwrap_or_default(),
        })
        .collect();
    let taints = raw
        .taints
        .iter()
        .flatten()
        .map(|t| Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone(),
        })
        .collect();
    DeviceEntry {
        name,
        slot,
        capacities,
        consumes,
        taints,
        allow_multi: raw.allow_multiple_allocations == Some(true),
        binds_to_node: raw.binds_to_node == Some(true),
        has_binding_conditions: raw
            .binding_conditions
            .as_ref()
            .is_some_and(|c| !c.is_empty()),
        binding_conditions_set: raw.binding_conditions.is_some(),
        node_name: raw.node_name.clone(),
        all_nodes: raw.all_nodes == Some(true),
        node_selector: raw.node_selector.as_ref().map(NodeSel::new),
        raw,
    }
}
