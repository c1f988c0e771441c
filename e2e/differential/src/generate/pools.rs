//! The generator's devices and ResourceSlice pools: node-local, network-attached and
//! all-nodes pools, multi-slice, incomplete and stale ones, partitionable devices with shared
//! counters, per-device node selection, consumable capacity, device taints and
//! DeviceTaintRules.

use serde_json::{Map, Value, json};

use super::{Builder, Device, GPU, PCIE_ROOTS, Pool, REGIONS, TAINT_KEY, merge};

impl Builder {
    /// One device's JSON; `counters` names the pool's counter sets.
    pub(super) fn device(
        &mut self,
        driver: &str,
        name: &str,
        counters: &[String],
    ) -> (Value, Device) {
        let memory_gi = self.pick(&[10u32, 20, 40, 80]);
        let mut attributes = Map::new();
        attributes.insert("numa".into(), json!({"int": self.rng.u8(0..2)}));
        attributes.insert("model".into(), json!({"string": self.pick(&["a", "b"])}));
        if self.one_in(2) {
            attributes.insert(
                "healthy".into(),
                json!({"bool": self.one_in(4) || self.one_in(2)}),
            );
        }
        if self.one_in(2) {
            attributes.insert(
                "version".into(),
                json!({"version": self.pick(&["1.2.3", "1.10.0", "2.0.0-rc.1"])}),
            );
        }
        if self.one_in(3) {
            attributes.insert(
                "resource.kubernetes.io/pcieRoot".into(),
                json!({"string": self.pick(&PCIE_ROOTS)}),
            );
        }
        let shared = self.one_in(4);
        let mut memory = json!({"value": format!("{memory_gi}Gi")});
        if shared && !self.one_in(3) {
            memory["requestPolicy"] = match self.rng.u8(0..3) {
                0 => {
                    json!({"default": "10Gi", "validRange": {"min": "5Gi", "max": format!("{memory_gi}Gi"), "step": "5Gi"}})
                }
                1 => json!({"default": "10Gi", "validValues": ["5Gi", "10Gi", "20Gi"]}),
                _ => json!({"default": "5Gi", "validRange": {"min": "1Gi"}}),
            };
        }
        let mut capacity = Map::new();
        capacity.insert("memory".into(), memory);
        if self.one_in(2) {
            capacity.insert("cores".into(), json!({"value": self.pick(&["4", "8"])}));
        }
        let mut device = Map::new();
        device.insert("name".into(), json!(name));
        device.insert("attributes".into(), Value::Object(attributes));
        device.insert("capacity".into(), Value::Object(capacity));
        if shared {
            device.insert("allowMultipleAllocations".into(), json!(true));
        }
        if !counters.is_empty() && !self.one_in(4) {
            let set = counters[self.rng.usize(0..counters.len())].clone();
            device.insert(
                "consumesCounters".into(),
                json!([{"counterSet": set, "counters": {
                    "slices": {"value": self.pick(&["1", "2", "3", "4"])},
                    "mem": {"value": format!("{}Gi", self.pick(&[10, 20, 40]))},
                }}]),
            );
        }
        if self.one_in(8) {
            let effect = self.pick(&["NoSchedule", "NoExecute", "None"]);
            device.insert(
                "taints".into(),
                json!([{"key": TAINT_KEY, "value": self.pick(&["x", "y"]), "effect": effect}]),
            );
        }
        if self.one_in(10) {
            device.insert("bindingConditions".into(), json!(["example.com/attached"]));
            device.insert(
                "bindingFailureConditions".into(),
                json!(["example.com/failed"]),
            );
        }
        let _ = driver;
        (
            Value::Object(device),
            Device {
                name: name.to_string(),
                shared,
                memory_gi,
                taken: false,
            },
        )
    }

    /// A pool of one to three slices; sometimes with a counter slice,
    /// sometimes incomplete, sometimes with a stale slice of an older
    /// generation.
    pub(super) fn pool(&mut self, driver: &'static str, name: String, node: Option<usize>) {
        let counters: Vec<String> = if self.one_in(3) {
            (0..self.rng.usize(1..=2))
                .map(|i| format!("set-{i}"))
                .collect()
        } else {
            Vec::new()
        };
        let device_slices = self.rng.usize(1..=3);
        let total = device_slices + usize::from(!counters.is_empty());
        let (placement, regions): (Value, Vec<&'static str>) = match node {
            Some(n) => (
                json!({"nodeName": self.nodes[n].name}),
                vec![self.nodes[n].region],
            ),
            None if self.one_in(2) => (json!({"allNodes": true}), REGIONS.to_vec()),
            None => {
                let region = self.pick(&REGIONS);
                (
                    json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "region", "operator": "In", "values": [region]}
                    ]}]}}),
                    vec![region],
                )
            }
        };
        let generation = 2;
        let incomplete = self.one_in(8);
        let mut slices = Vec::new();
        let mut devices = Vec::new();
        let mut next = 0;
        for s in 0..device_slices {
            let mut list = Vec::new();
            for _ in 0..self.rng.usize(1..=3) {
                let (json, device) =
                    self.device(driver, &format!("{}-{next}", &driver[..3]), &counters);
                next += 1;
                list.push(json);
                devices.push(device);
            }
            slices.push((format!("{name}-{s}"), json!({"devices": list})));
        }
        if !counters.is_empty() {
            let sets: Vec<Value> = counters
                .iter()
                .map(|set| {
                    json!({"name": set, "counters": {
                        "slices": {"value": self.pick(&["4", "7"])},
                        "mem": {"value": format!("{}Gi", self.pick(&[40, 80]))},
                    }})
                })
                .collect();
            slices.push((format!("{name}-counters"), json!({"sharedCounters": sets})));
        }
        if incomplete {
            // The last device slice has not been published yet.
            let gone = self.rng.usize(0..slices.len());
            slices.remove(gone);
        }
        for (slice_name, content) in slices {
            let mut spec = json!({
                "driver": driver,
                "pool": {"name": name, "generation": generation, "resourceSliceCount": total},
            });
            merge(&mut spec, &placement);
            merge(&mut spec, &content);
            self.objects.push(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": slice_name}, "spec": spec,
            }));
        }
        if self.one_in(10) {
            // A slice of an older generation the driver has not deleted yet.
            let (stale, _) = self.device(driver, &format!("{}-old", &driver[..3]), &[]);
            let mut spec = json!({
                "driver": driver,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": [stale],
            });
            merge(&mut spec, &placement);
            self.objects.push(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": format!("{name}-stale")}, "spec": spec,
            }));
        }
        if !incomplete {
            self.pools.push(Pool {
                driver,
                name,
                node,
                regions,
                devices,
            });
        }
    }

    /// A pool with `perDeviceNodeSelection`: each device says where it is.
    pub(super) fn per_device_pool(&mut self) {
        let mut list = Vec::new();
        for d in 0..self.rng.usize(1..=3) {
            let (mut json, _) = self.device(GPU, &format!("pd-{d}"), &[]);
            let where_ = match self.rng.u8(0..3) {
                0 => {
                    let n = self.rng.usize(0..self.nodes.len());
                    json!({"nodeName": self.nodes[n].name})
                }
                1 => json!({"allNodes": true}),
                _ => {
                    json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "region", "operator": "In", "values": [self.pick(&REGIONS)]}
                    ]}]}})
                }
            };
            merge(&mut json, &where_);
            list.push(json);
        }
        self.objects.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "per-device"},
            "spec": {
                "driver": GPU,
                "pool": {"name": "per-device", "generation": 1, "resourceSliceCount": 1},
                "perDeviceNodeSelection": true,
                "devices": list,
            },
        }));
    }

    pub(super) fn taint_rule(&mut self) {
        let mut selector = Map::new();
        selector.insert("driver".into(), json!(GPU));
        if let Some(pool) = self.pools.iter().find(|p| p.driver == GPU).cloned() {
            selector.insert("pool".into(), json!(pool.name));
            if self.one_in(2) && !pool.devices.is_empty() {
                let d = self.rng.usize(0..pool.devices.len());
                selector.insert("device".into(), json!(pool.devices[d].name));
            }
        }
        let effect = self.pick(&["NoSchedule", "NoExecute", "None"]);
        self.objects.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": "maintenance"},
            "spec": {
                "deviceSelector": selector,
                "taint": {"key": TAINT_KEY, "value": "rule", "effect": effect},
            },
        }));
    }
}
