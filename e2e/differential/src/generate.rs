//! Seeded random clusters that exercise the DRA allocator: node-local,
//! network-attached and all-nodes pools, multi-slice, incomplete and stale
//! pools, partitionable devices with shared counters and per-device node
//! selection, consumable capacity, device taints and DeviceTaintRules,
//! binding conditions, claims with CEL selectors, counts, `All`,
//! `firstAvailable`, match/distinct constraints, tolerations and admin access,
//! claim templates, shared claims, and claims already allocated to running
//! pods; every DRA gate on and off, at Kubernetes 1.34 to 1.37.
//!
//! Every node passes the scheduler's other filters (no taints, room for every
//! pod), so the DynamicResources plugin decides. Objects are valid as the API
//! server would have stored them: a cluster either engine refuses to read
//! says more about the generator than about the allocators, and the driver
//! counts it apart.
//!
//! Cluster `index` of seed `seed` is the same on every machine and run
//! (`fastrand`'s generator is fixed within its major version), so a cluster
//! is named by the pair.

use dra_sim::{FeatureGates, KubeVersion};
use fastrand::Rng;
use serde_json::{Map, Value, json};

mod pools;

/// One generated cluster and the scheduler it is judged by.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The seed of the run.
    pub seed: u64,
    /// The cluster's index in the run.
    pub index: u64,
    /// `--kubernetes-version`.
    pub version: KubeVersion,
    /// `--feature-gates` (may be empty).
    pub feature_gates: String,
    /// The cluster's objects, as `kubectl get -o json` items.
    pub objects: Vec<Value>,
}

/// The gates the generator turns on and off, with what each needs on
/// (upstream's feature dependencies in `pkg/features/kube_features.go`: a
/// scheduler refuses to start with a gate on whose dependency is off).
const FLIPPED_GATES: &[(&str, &[&str])] = &[
    ("DRAAdminAccess", &[]),
    ("DRAPrioritizedList", &[]),
    ("DRAPartitionableDevices", &[]),
    ("DRADeviceTaints", &[]),
    ("DRADeviceTaintRules", &["DRADeviceTaints"]),
    (
        "DRADeviceBindingConditions",
        &["DRAResourceClaimDeviceStatus"],
    ),
    ("DRAResourceClaimDeviceStatus", &[]),
    ("DRAConsumableCapacity", &[]),
    ("DRAFractionalCapacityRange", &["DRAConsumableCapacity"]),
];

const GPU: &str = "gpu.example.com";
const NIC: &str = "nic.example.com";
const TAINT_KEY: &str = "example.com/fault";
const REGIONS: [&str; 2] = ["region-a", "region-b"];
const PCIE_ROOTS: [&str; 2] = ["pci0000:00", "pci0000:80"];

/// Selectors over the attributes and capacities every generated device has
/// (`numa`, `model`, `memory`) and some have (`healthy`, `version`): an
/// unguarded lookup of a missing one is a CEL runtime error, which both
/// allocators must treat alike.
const GPU_SELECTORS: &[&str] = &[
    r#"device.attributes["gpu.example.com"].numa == 0"#,
    r#"device.attributes["gpu.example.com"].model == "a""#,
    r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0"#,
    r#"device.attributes["gpu.example.com"].numa > 0 || device.attributes["gpu.example.com"].model == "b""#,
    r#"has(device.attributes["gpu.example.com"].version) && device.attributes["gpu.example.com"].version.isGreaterThan(semver("1.5.0"))"#,
    r#"!has(device.attributes["gpu.example.com"].healthy) || device.attributes["gpu.example.com"].healthy"#,
    r#"device.allowMultipleAllocations"#,
    r#"device.driver == "gpu.example.com" && !has(device.attributes["gpu.example.com"].healthy)"#,
    r#"device.attributes["gpu.example.com"].model in ["a", "c"] && device.capacity["gpu.example.com"].memory.isLessThan(quantity("50Gi"))"#,
    // Unguarded: a runtime error on devices without the attribute.
    r#"device.attributes["gpu.example.com"].healthy"#,
];

const NIC_SELECTORS: &[&str] = &[
    r#"device.attributes["nic.example.com"].model == "a""#,
    r#"device.capacity["nic.example.com"].memory.isGreaterThan(quantity("10Gi"))"#,
];

/// Makes cluster `index` of the run with `seed`.
#[must_use]
pub fn cluster(seed: u64, index: u64) -> Generated {
    // SplitMix64 of the pair: neighbouring indices get unrelated streams.
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let mut rng = Rng::with_seed(z);
    let version = KubeVersion {
        minor: rng.u32(KubeVersion::OLDEST.minor..=KubeVersion::NEWEST.minor),
    };
    let feature_gates = gates(&mut rng, version);
    let mut builder = Builder {
        rng,
        objects: Vec::new(),
        pools: Vec::new(),
        nodes: Vec::new(),
        admin_namespace: false,
        next_uid: 0,
    };
    builder.build();
    Generated {
        seed,
        index,
        version,
        feature_gates,
        objects: builder.objects,
    }
}

fn gates(rng: &mut Rng, version: KubeVersion) -> String {
    let defaults = FeatureGates::for_version(version);
    let mut values: Vec<(&str, bool, bool)> = FLIPPED_GATES
        .iter()
        .map(|(name, _)| {
            let default = defaults.get(name).unwrap_or(false);
            let flip = rng.u8(0..5) == 0;
            // Sometimes a gate is named at its default, as operators do.
            let named = flip || rng.u8(0..10) == 0;
            (*name, default != flip, named)
        })
        .collect();
    // A gate whose dependency is off is turned off too.
    for _ in 0..2 {
        for (name, needs) in FLIPPED_GATES {
            let dependency_off = needs.iter().any(|dep| {
                values
                    .iter()
                    .any(|(other, value, _)| other == dep && !*value)
            });
            if dependency_off
                && let Some(entry) = values.iter_mut().find(|(other, _, _)| other == name)
                && entry.1
            {
                entry.1 = false;
                entry.2 = true;
            }
        }
    }
    values
        .iter()
        .filter(|(_, _, named)| *named)
        .map(|(name, value, _)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A device as the generator remembers it, to allocate it in claims that
/// are already allocated.
#[derive(Debug, Clone)]
struct Device {
    name: String,
    shared: bool,
    /// Remaining memory in Gi for shares of a multi-allocatable device.
    memory_gi: u32,
    taken: bool,
}

#[derive(Debug, Clone)]
struct Pool {
    driver: &'static str,
    name: String,
    /// `Some(node)` for a node-local pool, `None` when reachable from more
    /// nodes (selector or all nodes).
    node: Option<usize>,
    /// Regions whose nodes can use the pool (both for all-nodes pools).
    regions: Vec<&'static str>,
    devices: Vec<Device>,
}

#[derive(Debug, Clone)]
struct Node {
    name: String,
    region: &'static str,
}

struct Builder {
    rng: Rng,
    objects: Vec<Value>,
    pools: Vec<Pool>,
    nodes: Vec<Node>,
    admin_namespace: bool,
    next_uid: u32,
}

impl Builder {
    fn one_in(&mut self, n: u32) -> bool {
        self.rng.u32(0..n) == 0
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.usize(0..items.len())]
    }

    fn uid(&mut self, what: &str) -> String {
        self.next_uid += 1;
        format!("uid-{what}-{}", self.next_uid)
    }

    fn build(&mut self) {
        self.classes();
        let nodes = self.rng.usize(1..=3);
        for n in 0..nodes {
            let region = self.pick(&REGIONS);
            let name = format!("node-{n}");
            self.objects.push(json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "region": region}},
                "status": {
                    "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                    "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                },
            }));
            self.nodes.push(Node { name, region });
        }
        for n in 0..nodes {
            for p in 0..self.rng.usize(0..=2) {
                self.pool(GPU, format!("node-{n}-gpu-{p}"), Some(n));
            }
        }
        if self.one_in(2) {
            self.pool(NIC, "fabric-nic".into(), None);
        }
        if self.one_in(4) {
            self.pool(GPU, "shared-gpu".into(), None);
        }
        if self.one_in(6) {
            self.per_device_pool();
        }
        if self.one_in(5) {
            self.taint_rule();
        }
        self.allocated_claims();
        self.pending_pods();
        if self.admin_namespace {
            self.objects.push(json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "default", "labels": {"resource.kubernetes.io/admin-access": "true"}},
            }));
        }
    }

    fn classes(&mut self) {
        for (name, expression) in [
            ("gpu", format!("device.driver == \"{GPU}\"")),
            ("nic", format!("device.driver == \"{NIC}\"")),
        ] {
            self.objects.push(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]},
            }));
        }
        if self.one_in(2) {
            self.objects.push(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": "big-gpu"},
                "spec": {"selectors": [
                    {"cel": {"expression": format!("device.driver == \"{GPU}\"")}},
                    {"cel": {"expression": "device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0"}},
                ]},
            }));
        }
    }

    /// Claims allocated to pods already running, which hold their devices.
    fn allocated_claims(&mut self) {
        if self.pools.is_empty() || self.one_in(2) {
            return;
        }
        for c in 0..self.rng.usize(1..=2) {
            let n = self.rng.usize(0..self.nodes.len());
            let node = self.nodes[n].clone();
            let visible: Vec<usize> = (0..self.pools.len())
                .filter(|&p| match self.pools[p].node {
                    Some(owner) => owner == n,
                    None => self.pools[p].regions.contains(&node.region),
                })
                .collect();
            if visible.is_empty() {
                continue;
            }
            let admin = self.one_in(6);
            let mut results = Vec::new();
            let mut local = false;
            for _ in 0..self.rng.usize(1..=2) {
                let p = visible[self.rng.usize(0..visible.len())];
                let d = self.rng.usize(0..self.pools[p].devices.len());
                let pool = &mut self.pools[p];
                let device = &mut pool.devices[d];
                let mut result = json!({
                    "request": "req-0", "driver": pool.driver, "pool": pool.name, "device": device.name,
                });
                if admin {
                    result["adminAccess"] = json!(true);
                } else if device.shared && device.memory_gi >= 10 {
                    device.memory_gi -= 10;
                    result["shareID"] =
                        json!(format!("{:08x}-0000-4000-8000-0000000000{c:02}", d + 1));
                    result["consumedCapacity"] = json!({"memory": "10Gi"});
                } else if device.taken || device.shared {
                    continue;
                } else {
                    device.taken = true;
                }
                local |= pool.node.is_some();
                results.push(result);
            }
            if results.is_empty() {
                continue;
            }
            self.admin_namespace |= admin;
            let claim = format!("held-{c}");
            let holder = format!("holder-{c}");
            let holder_uid = self.uid("pod");
            let mut allocation = json!({"devices": {"results": results}});
            if local {
                allocation["nodeSelector"] = json!({"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node.name]}
                ]}]});
            }
            let mut exactly =
                json!({"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1});
            if admin {
                exactly["adminAccess"] = json!(true);
            }
            let claim_uid = self.uid("claim");
            self.objects.push(json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": claim, "namespace": "default", "uid": claim_uid},
                "spec": {"devices": {"requests": [{"name": "req-0", "exactly": exactly}]}},
                "status": {
                    "allocation": allocation,
                    "reservedFor": [{"resource": "pods", "name": holder, "uid": holder_uid}],
                },
            }));
            self.objects.push(pod(
                &holder,
                &holder_uid,
                Some(&node.name),
                0,
                0,
                &[("held", json!({"resourceClaimName": claim}))],
            ));
        }
    }

    fn request_body(&mut self, allow_admin: bool) -> Map<String, Value> {
        let mut body = Map::new();
        let class = match self.rng.u8(0..12) {
            0 => "nic",
            1 => "big-gpu",
            2 if self.one_in(6) => "no-such-class",
            _ => "gpu",
        };
        body.insert("deviceClassName".into(), json!(class));
        if self.one_in(10) {
            body.insert("allocationMode".into(), json!("All"));
        } else {
            body.insert("allocationMode".into(), json!("ExactCount"));
            body.insert("count".into(), json!(self.pick(&[1, 1, 1, 1, 2, 2, 3])));
        }
        if self.one_in(2) {
            let expression = if class == "nic" {
                self.pick(NIC_SELECTORS)
            } else {
                self.pick(GPU_SELECTORS)
            };
            body.insert(
                "selectors".into(),
                json!([{"cel": {"expression": expression}}]),
            );
        }
        if allow_admin && self.one_in(10) {
            body.insert("adminAccess".into(), json!(true));
            self.admin_namespace = true;
        }
        if self.one_in(4) {
            let toleration = if self.one_in(2) {
                json!({"key": TAINT_KEY, "operator": "Exists"})
            } else {
                json!({"key": TAINT_KEY, "operator": "Equal", "value": self.pick(&["x", "rule"]),
                       "effect": self.pick(&["NoSchedule", "NoExecute"])})
            };
            body.insert("tolerations".into(), json!([toleration]));
        }
        if self.one_in(4) {
            let amount = self.pick(&["3Gi", "5Gi", "10Gi", "15Gi", "30Gi"]);
            body.insert("capacity".into(), json!({"requests": {"memory": amount}}));
        }
        body
    }

    /// A claim spec: one to three requests, maybe alternatives and a constraint.
    fn claim_spec(&mut self) -> Value {
        let mut requests = Vec::new();
        let mut names = Vec::new();
        for r in 0..self.pick(&[1, 1, 1, 2, 2, 3]) {
            let name = format!("req-{r}");
            if self.one_in(5) {
                let subs: Vec<Value> = (0..self.rng.usize(1..=3))
                    .map(|s| {
                        let mut body = self.request_body(false);
                        body.insert("name".into(), json!(format!("sub-{s}")));
                        if s == 0 && self.one_in(3) {
                            names.push(format!("{name}/sub-0"));
                        }
                        Value::Object(body)
                    })
                    .collect();
                requests.push(json!({"name": name, "firstAvailable": subs}));
            } else {
                requests.push(json!({"name": name, "exactly": self.request_body(true)}));
            }
            names.push(name);
        }
        let mut devices = json!({"requests": requests});
        if self.one_in(4) {
            let kind = self.pick(&["matchAttribute", "distinctAttribute"]);
            let attribute = self.pick(&[
                "gpu.example.com/numa",
                "gpu.example.com/model",
                "resource.kubernetes.io/pcieRoot",
            ]);
            let mut constraint = Map::new();
            constraint.insert(kind.into(), json!(attribute));
            if names.len() > 1 && self.one_in(2) {
                let chosen: Vec<&String> = names.iter().filter(|_| self.one_in(2)).collect();
                if !chosen.is_empty() {
                    constraint.insert("requests".into(), json!(chosen));
                }
            }
            devices["constraints"] = json!([constraint]);
        }
        json!({"devices": devices})
    }

    fn pending_pods(&mut self) {
        let pods = self.rng.usize(1..=4);
        let mut shared: Option<String> = None;
        for p in 0..pods {
            let mut entries = Vec::new();
            for e in 0..self.pick(&[1, 1, 1, 2]) {
                let entry = format!("c{e}");
                // A pod never names one claim twice: kube-scheduler would
                // allocate it twice over (docs/divergences.md D3).
                let unused = |claim: &String| {
                    !entries.iter().any(|(_, source): &(String, Value)| {
                        source["resourceClaimName"] == json!(claim)
                    })
                };
                if let Some(claim) = shared.clone().filter(|c| unused(c) && self.one_in(3)) {
                    entries.push((entry, json!({"resourceClaimName": claim})));
                } else if self.one_in(3) {
                    let template = format!("tmpl-{p}-{e}");
                    let spec = self.claim_spec();
                    self.objects.push(json!({
                        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                        "metadata": {"name": template, "namespace": "default"},
                        "spec": {"spec": spec},
                    }));
                    entries.push((entry, json!({"resourceClaimTemplateName": template})));
                } else {
                    let claim = format!("claim-{p}-{e}");
                    let spec = self.claim_spec();
                    let uid = self.uid("claim");
                    self.objects.push(json!({
                        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": claim, "namespace": "default", "uid": uid},
                        "spec": spec,
                    }));
                    if shared.is_none() && self.one_in(3) {
                        shared = Some(claim.clone());
                    }
                    entries.push((entry, json!({"resourceClaimName": claim})));
                }
            }
            let entries: Vec<(&str, Value)> = entries
                .iter()
                .map(|(n, v)| (n.as_str(), v.clone()))
                .collect();
            let uid = self.uid("pod");
            let priority = self.pick(&[0, 0, 10]);
            let minute = self.rng.u32(0..5);
            self.objects.push(pod(
                &format!("pod-{p}"),
                &uid,
                None,
                priority,
                minute,
                &entries,
            ));
        }
    }
}

/// A pod with claim entries; bound to `node` when given (then Running).
fn pod(
    name: &str,
    uid: &str,
    node: Option<&str>,
    priority: i32,
    minute: u32,
    entries: &[(&str, Value)],
) -> Value {
    let claims: Vec<Value> = entries.iter().map(|(n, _)| json!({"name": n})).collect();
    let resource_claims: Vec<Value> = entries
        .iter()
        .map(|(n, source)| {
            let mut entry = json!({"name": n});
            merge(&mut entry, source);
            entry
        })
        .collect();
    let mut spec = json!({
        "priority": priority,
        "containers": [{
            "name": "main", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "claims": claims},
        }],
        "resourceClaims": resource_claims,
    });
    let phase = if let Some(node) = node {
        spec["nodeName"] = json!(node);
        "Running"
    } else {
        "Pending"
    };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "default", "uid": uid,
            "creationTimestamp": format!("2026-12-01T10:{minute:02}:00Z"),
        },
        "spec": spec,
        "status": {"phase": phase},
    })
}

/// Adds `extra`'s keys to `target` (both objects).
fn merge(target: &mut Value, extra: &Value) {
    if let (Value::Object(t), Value::Object(e)) = (target, extra) {
        for (k, v) in e {
            t.insert(k.clone(), v.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_and_index_give_the_same_cluster() {
        let a = cluster(7, 3);
        let b = cluster(7, 3);
        assert_eq!(a.objects, b.objects);
        assert_eq!(a.feature_gates, b.feature_gates);
        assert_ne!(cluster(7, 4).objects, a.objects);
    }

    #[test]
    fn a_gate_is_never_on_while_its_dependency_is_off() {
        for index in 0..500 {
            let g = cluster(1, index);
            let mut gates = FeatureGates::for_version(g.version);
            gates.apply_flag(&g.feature_gates).unwrap();
            for (name, needs) in FLIPPED_GATES {
                if gates.get(name) == Some(true) {
                    for dep in *needs {
                        assert_eq!(
                            gates.get(dep),
                            Some(true),
                            "{name} on without {dep}: {}",
                            g.feature_gates
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_generated_cluster_loads() {
        for index in 0..300 {
            let g = cluster(2, index);
            let mut loader = dra_sim::Loader::new();
            for (document, object) in g.objects.iter().enumerate() {
                let origin = dra_sim::objects::Origin {
                    source: "generated".into(),
                    document,
                    item: None,
                };
                loader
                    .add_value(origin, object.clone())
                    .unwrap_or_else(|e| {
                        panic!(
                            "cluster {index}: {e}\n{}",
                            serde_json::to_string_pretty(object).unwrap()
                        )
                    });
            }
        }
    }
}
