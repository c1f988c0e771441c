//! Workload generators shared by the benchmarks and the tests that check the
//! benchmarks' workloads are valid. Everything is built in memory as the same
//! Kubernetes objects a snapshot file would hold; building is never timed.

use std::collections::BTreeMap;

use dra_sim::ClusterObjects;
use k8s_openapi::api::core::v1::{
    Container, Node, NodeStatus, Pod, PodResourceClaim, PodSpec, ResourceRequirements,
};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, Counter, CounterSet, Device, DeviceAttribute, DeviceCapacity, DeviceClaim,
    DeviceClass, DeviceClassSpec, DeviceCounterConsumption, DeviceRequest, DeviceSelector,
    ExactDeviceRequest, ResourceClaimSpec, ResourceClaimTemplate, ResourceClaimTemplateSpec,
    ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The driver of the generated GPUs.
pub const DRIVER: &str = "gpu.example.com";

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: namespace.map(str::to_string),
        ..Default::default()
    }
}

fn q(s: &str) -> Quantity {
    Quantity(s.to_string())
}

/// A node group as the snapshot holds it: a `dra-autoscaler.io/v1alpha1`
/// NodeGroup object named `name` with `spec`.
#[must_use]
pub fn node_group_object(
    name: &str,
    spec: &dra_api::NodeGroupSpec,
) -> dra_sim::objects::ExtraObject {
    dra_sim::objects::ExtraObject {
        api_version: "dra-autoscaler.io/v1alpha1".into(),
        kind: "NodeGroup".into(),
        origin: dra_sim::objects::Origin::default(),
        value: serde_json::json!({
            "apiVersion": "dra-autoscaler.io/v1alpha1",
            "kind": "NodeGroup",
            "metadata": {"name": name},
            "spec": spec,
        }),
    }
}

/// A node with generous CPU and memory.
#[must_use]
pub fn node(name: &str) -> Node {
    let resources: BTreeMap<String, Quantity> = [
        ("cpu".into(), q("128")),
        ("memory".into(), q("1Ti")),
        ("pods".into(), q("110")),
    ]
    .into();
    let mut metadata = meta(name, None);
    metadata.labels = Some([("kubernetes.io/hostname".to_string(), name.to_string())].into());
    Node {
        metadata,
        status: Some(NodeStatus {
            allocatable: Some(resources.clone()),
            capacity: Some(resources),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The GPU DeviceClass.
#[must_use]
pub fn gpu_class() -> DeviceClass {
    DeviceClass {
        metadata: meta(DRIVER, None),
        spec: Some(DeviceClassSpec {
            selectors: Some(vec![cel(&format!("device.driver == \"{DRIVER}\""))]),
            ..Default::default()
        }),
    }
}

fn cel(expression: &str) -> DeviceSelector {
    DeviceSelector {
        cel: Some(CELDeviceSelector {
            expression: expression.to_string(),
        }),
    }
}

/// The ResourceSlices of a node with `gpus` GPUs, each partitioned into
/// `partitions` MIG-like devices drawing on one counter set per GPU (1.35+
/// layout: counters in their own slice). With `partitions == 1` the devices
/// are whole GPUs with no counters.
#[must_use]
pub fn gpu_slices(node_name: &str, gpus: usize, partitions: usize) -> Vec<ResourceSlice> {
    let pool = ResourcePool {
        name: node_name.to_string(),
        generation: 1,
        resource_slice_count: if partitions > 1 { 2 } else { 1 },
    };
    let mut devices = Vec::new();
    let mut counter_sets = Vec::new();
    for g in 0..gpus {
        if partitions > 1 {
            counter_sets.push(CounterSet {
                name: format!("gpu-{g}"),
                counters: [
                    ("memory".to_string(), Counter { value: q("70Gi") }),
                    (
                        "slices".to_string(),
                        Counter {
                            value: q(&partitions.to_string()),
                        },
                    ),
                ]
                .into(),
            });
        }
        for p in 0..partitions {
            let memory = if partitions > 1 { "10Gi" } else { "80Gi" };
            devices.push(Device {
                name: if partitions > 1 {
                    format!("gpu-{g}-part-{p}")
                } else {
                    format!("gpu-{g}")
                },
                attributes: Some(
                    [
                        (
                            "model".to_string(),
                            DeviceAttribute {
                                string: Some("H100".into()),
                                ..Default::default()
                            },
                        ),
                        (
                            "index".to_string(),
                            DeviceAttribute {
                                int: Some(g as i64),
                                ..Default::default()
                            },
                        ),
                    ]
                    .into(),
                ),
                capacity: Some(
                    [(
                        "memory".to_string(),
                        DeviceCapacity {
                            value: q(memory),
                            request_policy: None,
                        },
                    )]
                    .into(),
                ),
                consumes_counters: (partitions > 1).then(|| {
                    vec![DeviceCounterConsumption {
                        compatibility_groups: None,
                        counter_set: format!("gpu-{g}"),
                        counters: [
                            ("memory".to_string(), Counter { value: q("10Gi") }),
                            ("slices".to_string(), Counter { value: q("1") }),
                        ]
                        .into(),
                    }]
                }),
                ..Default::default()
            });
        }
    }
    let spec = |devices: Option<Vec<Device>>, shared_counters: Option<Vec<CounterSet>>| {
        ResourceSliceSpec {
            driver: DRIVER.to_string(),
            node_name: Some(node_name.to_string()),
            pool: pool.clone(),
            devices,
            shared_counters,
            ..Default::default()
        }
    };
    let mut slices = vec![ResourceSlice {
        metadata: meta(&format!("{node_name}-gpus"), None),
        spec: spec(Some(devices), None),
    }];
    if partitions > 1 {
        slices.push(ResourceSlice {
            metadata: meta(&format!("{node_name}-counters"), None),
            spec: spec(None, Some(counter_sets)),
        });
    }
    slices
}

/// A claim template asking for one GPU device with at least `min_memory`.
#[must_use]
pub fn gpu_template(namespace: &str, name: &str, min_memory: &str) -> ResourceClaimTemplate {
    ResourceClaimTemplate {
        metadata: meta(name, Some(namespace)),
        spec: Some(ResourceClaimTemplateSpec {
            metadata: None,
            spec: Some(ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(vec![DeviceRequest {
                        name: "gpu".into(),
                        exactly: Some(ExactDeviceRequest {
                            device_class_name: DRIVER.into(),
                            allocation_mode: Some("ExactCount".into()),
                            count: Some(1),
                            selectors: Some(vec![cel(&format!(
                                "device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"{min_memory}\")) >= 0"
                            ))]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            }),
        }),
    }
}

/// A pending pod using a claim from `template`.
#[must_use]
pub fn gpu_pod(namespace: &str, name: &str, template: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            uid: Some(format!("uid-{name}")),
            ..meta(name, Some(namespace))
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "main".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(
                        [
                            ("cpu".to_string(), q("1")),
                            ("memory".to_string(), q("4Gi")),
                        ]
                        .into(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            resource_claims: Some(vec![PodResourceClaim {
                name: "gpu".into(),
                resource_claim_template_name: Some(template.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// A GPU cluster: `nodes` nodes with `gpus` whole 80Gi GPUs each and `pods`
/// pending pods each asking for one GPU with ≥ 40Gi through a CEL selector.
#[must_use]
pub fn gpu_cluster(nodes: usize, gpus: usize, pods: usize) -> ClusterObjects {
    let mut objects = ClusterObjects::default();
    objects.device_classes.push(gpu_class());
    objects
        .resource_claim_templates
        .push(gpu_template("ml", "gpu", "40Gi"));
    for n in 0..nodes {
        let name = format!("node-{n:05}");
        objects.resource_slices.extend(gpu_slices(&name, gpus, 1));
        objects.nodes.push(node(&name));
    }
    for p in 0..pods {
        objects
            .pods
            .push(gpu_pod("ml", &format!("trainer-{p:05}"), "gpu"));
    }
    objects
}

/// Karpenter's in-memory scheduling benchmark workload
/// (kubernetes-sigs/karpenter,
/// `pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go`
/// and the 400 `fake.InstanceTypes` it plans against), rebuilt as Kubernetes
/// objects and NodeGroups. It matches upstream HEAD as of 2026-08-20 (commit
/// 22664681, v1.14.0-20; neither file changed since v1.14.0), except that
/// the pods' random draws come from [`SplitMix`] rather than Go's
/// `math/rand` (see [`pods`]).
pub mod scaledown;

pub mod karpenter {
    use std::collections::BTreeMap;

    use dra_api::{CapacityType, NodeGroupSpec, NodeTemplate, TopologyDomain};
    use dra_sim::ClusterObjects;
    use dra_sim::objects::ExtraObject;
    use k8s_openapi::api::core::v1::{
        Affinity, Container, Pod, PodAffinity, PodAffinityTerm, PodAntiAffinity, PodSpec,
        ResourceRequirements, TopologySpreadConstraint,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    /// Zone label.
    pub const ZONE: &str = "topology.kubernetes.io/zone";
    /// Hostname label.
    pub const HOSTNAME: &str = "kubernetes.io/hostname";
    /// Capacity-type label (Karpenter's name).
    pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
    /// Instance-type label.
    pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
    /// Number of instance shapes.
    pub const SHAPES: usize = 400;

    /// A deterministic PRNG (SplitMix64): the workload must be the same on
    /// every run and every machine. Upstream draws from Go's `math/rand`
    /// seeded with 42; that sequence is not reproduced here.
    #[derive(Debug, Clone)]
    pub struct SplitMix(u64);

    impl SplitMix {
        /// Seeded generator.
        #[must_use]
        pub fn new(seed: u64) -> Self {
            Self(seed)
        }

        /// Next value.
        pub fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        /// Uniform in `0..n`.
        pub fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
        }
    }

    /// Price per hour of shape `i`: 0.1 × vCPU + 0.1 × memory in GB (10⁹ bytes).
    #[must_use]
    pub fn price(i: usize) -> f64 {
        let vcpu = (i + 1) as f64;
        let memory_gb = 2.0 * (i + 1) as f64 * 1_073_741_824.0 / 1e9;
        0.1 * vcpu + 0.1 * memory_gb
    }

    /// The 2,000 NodeGroups: one per (shape, zone, capacity type) offering.
    #[must_use]
    pub fn node_groups() -> Vec<ExtraObject> {
        let mut groups = Vec::new();
        let offerings: [(&str, CapacityType); 5] = [
            ("test-zone-1", CapacityType::Spot),
            ("test-zone-2", CapacityType::Spot),
            ("test-zone-1", CapacityType::OnDemand),
            ("test-zone-2", CapacityType::OnDemand),
            ("test-zone-3", CapacityType::OnDemand),
        ];
        for i in 0..SHAPES {
            for (zone, capacity_type) in offerings {
                let name = format!("fake-it-{i}-{zone}-{capacity_type}");
                let capacity: BTreeMap<String, Quantity> = [
                    ("cpu".to_string(), Quantity((i + 1).to_string())),
                    ("memory".to_string(), Quantity(format!("{}Gi", 2 * (i + 1)))),
                    ("pods".to_string(), Quantity((10 * (i + 1)).to_string())),
                ]
                .into();
                let labels: BTreeMap<String, String> = [
                    (INSTANCE_TYPE.to_string(), format!("fake-it-{i}")),
                    (ZONE.to_string(), zone.to_string()),
                    (
                        CAPACITY_TYPE.to_string(),
                        capacity_type.as_str().to_string(),
                    ),
                ]
                .into();
                let spec = NodeGroupSpec {
                    provider: "fake".into(),
                    provider_id: name.clone(),
                    min_size: 0,
                    max_size: 1_000_000,
                    capacity_type,
                    reservation: None,
                    price_per_hour: price(i),
                    priority: 0,
                    topology_domain: Some(TopologyDomain {
                        key: ZONE.into(),
                        value: zone.into(),
                    }),
                    template: NodeTemplate {
                        labels,
                        taints: Vec::new(),
                        capacity,
                        allocatable: None,
                        resource_slices: Vec::new(),
                    },
                    scale_down: None,
                };
                groups.push(super::node_group_object(&name, &spec));
            }
        }
        groups
    }

    /// Upstream's label values (`randomLabelValue`).
    const LABEL_VALUES: [&str; 7] = ["a", "b", "c", "d", "e", "f", "g"];
    /// Upstream's CPU requests (`randomCPU`), in millicores.
    const CPUS: [&str; 5] = ["100m", "250m", "500m", "1000m", "1500m"];
    /// Upstream's memory requests (`randomMemory`), in Mi.
    const MEMORIES: [u32; 6] = [100, 256, 512, 1024, 2048, 4096];

    /// The five kinds of pod in upstream's `makeDiversePods`.
    #[derive(Debug, Clone, Copy)]
    enum Kind {
        /// `makeGenericPods`.
        Generic,
        /// `makeTopologySpreadPods` on the given key.
        Spread(&'static str),
        /// `makePodAffinityPods` on the zone key.
        ZoneAffinity,
        /// `makePodAntiAffinityPods` on the hostname key.
        HostnameAntiAffinity,
    }

    fn labels(key: &str, value: &str) -> BTreeMap<String, String> {
        [(key.to_string(), value.to_string())].into()
    }

    fn selector(match_labels: BTreeMap<String, String>) -> LabelSelector {
        LabelSelector {
            match_labels: Some(match_labels),
            ..Default::default()
        }
    }

    fn term(match_labels: BTreeMap<String, String>, topology_key: &str) -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(selector(match_labels)),
            topology_key: topology_key.to_string(),
            ..Default::default()
        }
    }

    /// `randomLabelValue`.
    fn label_value(rng: &mut SplitMix) -> &'static str {
        LABEL_VALUES[rng.below(LABEL_VALUES.len() as u64) as usize]
    }

    /// One pod of `kind`, drawing from `rng` in upstream's order: the label
    /// value, then (spread pods) the selector's value, then CPU, then memory.
    fn pod(i: usize, kind: Kind, rng: &mut SplitMix) -> Pod {
        let mut spec = PodSpec::default();
        let pod_labels = match kind {
            Kind::Generic => labels("my-label", label_value(rng)),
            Kind::Spread(topology_key) => {
                let pod_labels = labels("my-label", label_value(rng));
                spec.topology_spread_constraints = Some(vec![TopologySpreadConstraint {
                    label_selector: Some(selector(labels("my-label", label_value(rng)))),
                    max_skew: 1,
                    topology_key: topology_key.to_string(),
                    when_unsatisfiable: "DoNotSchedule".into(),
                    ..Default::default()
                }]);
                pod_labels
            }
            Kind::ZoneAffinity => {
                // Upstream's spelling of the key.
                let pod_labels = labels("my-affininity", label_value(rng));
                spec.affinity = Some(Affinity {
                    pod_affinity: Some(PodAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![term(
                            pod_labels.clone(),
                            ZONE,
                        )]),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
                pod_labels
            }
            Kind::HostnameAntiAffinity => {
                let pod_labels = labels("app", "nginx");
                spec.affinity = Some(Affinity {
                    pod_anti_affinity: Some(PodAntiAffinity {
                        required_during_scheduling_ignored_during_execution: Some(vec![term(
                            pod_labels.clone(),
                            HOSTNAME,
                        )]),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
                pod_labels
            }
        };
        let cpu = CPUS[rng.below(CPUS.len() as u64) as usize];
        let memory = MEMORIES[rng.below(MEMORIES.len() as u64) as usize];
        spec.containers = vec![Container {
            name: "app".into(),
            image: Some("nginx".into()),
            resources: Some(ResourceRequirements {
                requests: Some(
                    [
                        ("cpu".to_string(), Quantity(cpu.into())),
                        ("memory".to_string(), Quantity(format!("{memory}Mi"))),
                    ]
                    .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }];
        Pod {
            metadata: ObjectMeta {
                name: Some(format!("pod-{i:05}")),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{i:05}")),
                labels: Some(pod_labels),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        }
    }

    /// Upstream's `makeDiversePods(n)`: five parts of `n / 5` pods each, in
    /// this order —
    /// 1. generic pods, labels `{my-label: <random>}`;
    /// 2. topology spread on the zone: labels `{my-label: <random>}`, one
    ///    constraint (maxSkew 1, DoNotSchedule) selecting
    ///    `{my-label: <a second, independent random value>}`;
    /// 3. the same spread on the hostname;
    /// 4. required pod affinity on the zone: labels
    ///    `{my-affininity: <random>}` (upstream's spelling) and one term
    ///    selecting the pod's own labels;
    /// 5. required pod anti-affinity on the hostname: labels `{app: nginx}`
    ///    and one term selecting `{app: nginx}`;
    ///
    /// then the remaining `n - 5 * (n / 5)` pods as generic pods at the end.
    /// Label values are drawn from a–g; every pod requests CPU from
    /// {100m, 250m, 500m, 1000m, 1500m} and memory from
    /// {100, 256, 512, 1024, 2048, 4096}Mi, drawn per pod in upstream's
    /// order (label value, spread selector value, CPU, memory).
    ///
    /// This matches `makeDiversePods` and the functions it calls in
    /// `pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go`
    /// at kubernetes-sigs/karpenter HEAD as of 2026-08-20 (commit 22664681,
    /// v1.14.0-20), except the random numbers: the draws come from
    /// [`SplitMix`] seeded with 42, not from Go's `math/rand` source seeded
    /// with 42, so the values (not their sets or their order of drawing)
    /// differ from upstream's. Pods are named `pod-{i:05}` in namespace
    /// `default` with uid `uid-{i:05}` (upstream uses random names and UUIDs).
    #[must_use]
    pub fn pods(n: usize) -> Vec<Pod> {
        let mut rng = SplitMix::new(42);
        let part = n / 5;
        let kinds = [
            Kind::Generic,
            Kind::Spread(ZONE),
            Kind::Spread(HOSTNAME),
            Kind::ZoneAffinity,
            Kind::HostnameAntiAffinity,
        ];
        let remainder = n - 5 * part;
        kinds
            .into_iter()
            .flat_map(|kind| std::iter::repeat_n(kind, part))
            .chain(std::iter::repeat_n(Kind::Generic, remainder))
            .enumerate()
            .map(|(i, kind)| pod(i, kind, &mut rng))
            .collect()
    }

    /// A pod's CPU (millicores) and memory (bytes) requests, and whether it
    /// has hostname anti-affinity (needs a node of its own among its kind).
    fn demand(pod: &Pod) -> (i64, i64, bool) {
        let Some(spec) = &pod.spec else {
            return (0, 0, false);
        };
        let (mut cpu, mut memory) = (0, 0);
        for requests in spec
            .containers
            .iter()
            .filter_map(|c| c.resources.as_ref()?.requests.as_ref())
        {
            cpu += requests
                .get("cpu")
                .and_then(|q| dra_sim::quantity::milli_value(&q.0).ok())
                .unwrap_or(0);
            memory += requests
                .get("memory")
                .and_then(|q| dra_sim::quantity::value(&q.0).ok())
                .unwrap_or(0);
        }
        let anti = spec
            .affinity
            .as_ref()
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .is_some();
        (cpu, memory, anti)
    }

    /// The least any plan for `pods` can cost on these shapes, Karpenter's
    /// included: a shape's price is linear in its size (shape *i* is *i+1*
    /// units of 1 vCPU, 2 GiB and 10 pods at `price(0)` each), so the units
    /// bought cover at least the summed CPU, the summed memory, the pod
    /// count and one node per hostname anti-affinity pod.
    #[must_use]
    pub fn price_lower_bound(pods: &[Pod]) -> f64 {
        let (mut cpu_milli, mut memory, mut exclusive) = (0i64, 0i64, 0usize);
        for pod in pods {
            let (cpu, mem, anti) = demand(pod);
            cpu_milli += cpu;
            memory += mem;
            exclusive += usize::from(anti);
        }
        let units = [
            cpu_milli as f64 / 1000.0,
            memory as f64 / (2.0 * 1_073_741_824.0),
            pods.len() as f64 / 10.0,
            exclusive as f64,
        ]
        .into_iter()
        .fold(0.0, f64::max)
        .ceil();
        units * price(0)
    }

    /// A model of Karpenter's bin-packing on this workload, for an estimate
    /// of its plan's price where Karpenter cannot be run: pods in its queue
    /// order (CPU, then memory, descending); each goes to the in-flight node
    /// with the fewest pods that can still take it (some shape holds the
    /// total; hostname anti-affinity pods never share a node), else to a
    /// new node; each node is then bought as the smallest shape holding it.
    /// Spread and affinity constraints are left out (they only add cost), so
    /// this errs towards a cheaper Karpenter. Returns (nodes, price per hour).
    #[must_use]
    pub fn karpenter_model(pods: &[Pod]) -> (usize, f64) {
        const GIB: f64 = 1_073_741_824.0;
        let mut items: Vec<(f64, f64, bool)> = pods
            .iter()
            .map(|p| {
                let (cpu, memory, anti) = demand(p);
                (cpu as f64 / 1000.0, memory as f64 / GIB, anti)
            })
            .collect();
        items.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.total_cmp(&a.1)));
        let largest = SHAPES as f64;
        // Per node: cpu, memory (GiB), pods, has an anti-affinity pod.
        let mut nodes: Vec<(f64, f64, usize, bool)> = Vec::new();
        // (pod count, node index): in-flight nodes, fewest pods first.
        let mut by_count: std::collections::BTreeSet<(usize, usize)> =
            std::collections::BTreeSet::new();
        for (cpu, memory, anti) in items {
            let home = by_count.iter().copied().find(|&(_, i)| {
                let n = nodes[i];
                !(anti && n.3)
                    && n.0 + cpu <= largest
                    && n.1 + memory <= 2.0 * largest
                    && (n.2 + 1) as f64 <= 10.0 * largest
            });
            let i = match home {
                Some(entry) => {
                    by_count.remove(&entry);
                    entry.1
                }
                None => {
                    nodes.push((0.0, 0.0, 0, false));
                    nodes.len() - 1
                }
            };
            nodes[i] = (
                nodes[i].0 + cpu,
                nodes[i].1 + memory,
                nodes[i].2 + 1,
                nodes[i].3 || anti,
            );
            by_count.insert((nodes[i].2, i));
        }
        let price: f64 = nodes
            .iter()
            .map(|&(cpu, memory, count, _)| {
                let units = cpu
                    .max(memory / 2.0)
                    .max(count as f64 / 10.0)
                    .ceil()
                    .max(1.0);
                units * price(0)
            })
            .sum();
        (nodes.len(), price)
    }

    /// The whole input: an empty cluster, the NodeGroups and `n` pending pods.
    #[must_use]
    pub fn workload(n: usize) -> ClusterObjects {
        ClusterObjects {
            pods: pods(n),
            extra: node_groups(),
            ..Default::default()
        }
    }
}

pub mod colocated;

/// The GPU-gang planning workload of the planner benchmark (b): pending
/// gangs of pods that each want one GPU partition through DRA, existing
/// nodes (every tenth with one partitionable GPU, the rest CPU-only) and
/// node groups of partitionable GPU nodes of different sizes and prices.
pub mod gangs {
    use std::collections::BTreeMap;

    use dra_api::{CapacityType, NodeGroupSpec, NodeTemplate};
    use dra_sim::ClusterObjects;
    use dra_sim::objects::{ExtraObject, Origin};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::{gpu_class, gpu_pod, gpu_slices, gpu_template, node};

    /// Builds the workload: `gangs` gangs of `size` pods, `nodes` existing
    /// nodes, `groups` node groups.
    #[must_use]
    pub fn workload(gangs: usize, size: usize, nodes: usize, groups: usize) -> ClusterObjects {
        let mut objects = ClusterObjects::default();
        objects.device_classes.push(gpu_class());
        objects
            .resource_claim_templates
            .push(gpu_template("ml", "partition", "5Gi"));
        for n in 0..nodes {
            let name = format!("node-{n:05}");
            if n % 10 == 0 {
                objects.resource_slices.extend(gpu_slices(&name, 1, 7));
            }
            objects.nodes.push(node(&name));
        }
        for g in 0..gangs {
            let group = format!("gang-{g:04}");
            objects.extra.push(ExtraObject {
                api_version: "scheduling.x-k8s.io/v1alpha1".into(),
                kind: "PodGroup".into(),
                origin: Origin::default(),
                value: serde_json::json!({
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                    "kind": "PodGroup",
                    "metadata": {"name": group, "namespace": "ml"},
                    "spec": {"minMember": size},
                }),
            });
            for p in 0..size {
                let mut pod = gpu_pod("ml", &format!("{group}-{p}"), "partition");
                pod.metadata.labels = Some(
                    [(
                        dra_plan::gang::COSCHEDULING_LABEL.to_string(),
                        group.clone(),
                    )]
                    .into(),
                );
                objects.pods.push(pod);
            }
        }
        for i in 0..groups {
            let gpus = 1 + i % 8;
            let name = format!("gpu-{gpus}x-{i:02}");
            let capacity: BTreeMap<String, Quantity> = [
                ("cpu".to_string(), Quantity("128".into())),
                ("memory".to_string(), Quantity("1Ti".into())),
                ("pods".to_string(), Quantity("110".into())),
            ]
            .into();
            let spec = NodeGroupSpec {
                provider: "fake".into(),
                provider_id: name.clone(),
                min_size: 0,
                max_size: 10_000,
                capacity_type: CapacityType::OnDemand,
                reservation: None,
                price_per_hour: 3.0 * gpus as f64 * (1.0 + (i % 5) as f64 * 0.1),
                priority: 0,
                topology_domain: None,
                template: NodeTemplate {
                    labels: BTreeMap::new(),
                    taints: Vec::new(),
                    capacity,
                    allocatable: None,
                    resource_slices: gpu_slices("template", gpus, 7)
                        .into_iter()
                        .map(|s| s.spec)
                        .collect(),
                },
                scale_down: None,
            };
            objects.extra.push(super::node_group_object(&name, &spec));
        }
        objects
    }
}

/// The filter benchmark's cluster (issue: scheduler filters): 5,000 nodes in
/// 10 zones, every fifth a GPU node with 8 node-local GPUs, and pods of four
/// kinds in turn — plain, zone-spread (groups of 50), hostname anti-affinity
/// (groups of 20) and DRA (one GPU through a claim template, GPU nodes only).
pub mod mixed {
    use dra_sim::ClusterObjects;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    const ZONES: usize = 10;

    fn obj<T: DeserializeOwned>(value: Value) -> T {
        match serde_json::from_value(value) {
            Ok(v) => v,
            Err(e) => panic!("benchmark object does not parse: {e}"),
        }
    }

    /// The objects for `node_count` nodes and `pod_count` pending pods.
    #[must_use]
    pub fn cluster(node_count: usize, pod_count: usize) -> ClusterObjects {
        let nodes = (0..node_count)
            .map(|i| {
                let name = format!("node-{i:05}");
                obj(json!({
                    "metadata": {"name": name, "labels": {
                        "kubernetes.io/hostname": name,
                        "topology.kubernetes.io/zone": format!("zone-{}", i % ZONES),
                        "node.kubernetes.io/instance-type": if i % 5 == 0 { "gpu" } else { "cpu" }}},
                    "status": {"allocatable": {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "100Gi", "pods": "110"}}
                }))
            })
            .collect();
        let resource_slices = (0..node_count)
            .filter(|i| i % 5 == 0)
            .map(|i| {
                let name = format!("node-{i:05}");
                obj(json!({
                    "metadata": {"name": format!("{name}-gpus")},
                    "spec": {"driver": "gpu.example.com", "nodeName": name,
                             "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                             "devices": (0..8).map(|d| json!({"name": format!("gpu-{d}")})).collect::<Vec<_>>()}
                }))
            })
            .collect();
        let pods = (0..pod_count)
            .map(|i| {
                let name = format!("pod-{i:05}");
                let container = |cpu: &str| json!([{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "2Gi"}}}]);
                let (labels, spec) = match i % 4 {
                    0 => (json!({"app": "plain"}), json!({"containers": container("2")})),
                    1 => {
                        let group = format!("spread-{}", i / 200);
                        (json!({"app": group}), json!({"containers": container("3"),
                            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": group}}}]}))
                    }
                    2 => {
                        let group = format!("anti-{}", i / 80);
                        (json!({"app": group}), json!({"containers": container("4"),
                            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                                {"labelSelector": {"matchLabels": {"app": group}}, "topologyKey": "kubernetes.io/hostname"}]}}}))
                    }
                    _ => (json!({"app": "dra"}), json!({"containers": container("1"),
                        "nodeSelector": {"node.kubernetes.io/instance-type": "gpu"},
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]})),
                };
                obj(json!({"metadata": {"name": name, "namespace": "default", "labels": labels,
                    "creationTimestamp": format!("2026-11-01T{:02}:{:02}:{:02}Z", i / 3600 % 24, i / 60 % 60, i % 60)},
                    "spec": spec}))
            })
            .collect();
        ClusterObjects {
            nodes,
            pods,
            device_classes: vec![obj(json!({
                "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}
            }))],
            resource_slices,
            resource_claim_templates: vec![obj(json!({
                "metadata": {"name": "one-gpu", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}}
            }))],
            ..ClusterObjects::default()
        }
    }
}

/// `kubectl get pods -A -o yaml` of `n` running pods, as kubectl prints them
/// (a `kind: List` with metadata, managed fields, spec, status): the shape of
/// a real snapshot, ~2 KB of YAML a pod.
#[must_use]
pub fn kubectl_pods_yaml(n: usize) -> String {
    use std::fmt::Write;
    let mut out = String::from("apiVersion: v1\nitems:\n");
    for i in 0..n {
        let ns = format!("team-{}", i % 40);
        let _ = write!(
            out,
            r#"- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      kubectl.kubernetes.io/restartedAt: "2026-11-30T10:00:00Z"
    creationTimestamp: "2026-11-30T10:{m:02}:{s:02}Z"
    generateName: worker-{rs}-
    labels:
      app: worker
      pod-template-hash: "{rs}"
      team: "{team}"
    name: worker-{rs}-{i:06}
    namespace: {ns}
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: ReplicaSet
      name: worker-{rs}
      uid: 4b1f0c3e-0000-4000-8000-{i:012}
    resourceVersion: "{rv}"
    uid: 9a1e2b3c-0000-4000-8000-{i:012}
  spec:
    containers:
    - image: registry.example.com/worker:1.2.3
      imagePullPolicy: IfNotPresent
      name: worker
      ports:
      - containerPort: 8080
        name: http
        protocol: TCP
      resources:
        limits:
          memory: 2Gi
        requests:
          cpu: 500m
          memory: 1Gi
      terminationMessagePath: /dev/termination-log
      terminationMessagePolicy: File
      volumeMounts:
      - mountPath: /var/run/secrets/kubernetes.io/serviceaccount
        name: kube-api-access-{i:06}
        readOnly: true
    dnsPolicy: ClusterFirst
    enableServiceLinks: true
    nodeName: node-{node:05}
    preemptionPolicy: PreemptLowerPriority
    priority: 0
    restartPolicy: Always
    schedulerName: default-scheduler
    securityContext: {{}}
    serviceAccount: default
    serviceAccountName: default
    terminationGracePeriodSeconds: 30
    tolerations:
    - effect: NoExecute
      key: node.kubernetes.io/not-ready
      operator: Exists
      tolerationSeconds: 300
    - effect: NoExecute
      key: node.kubernetes.io/unreachable
      operator: Exists
      tolerationSeconds: 300
    volumes:
    - name: kube-api-access-{i:06}
      projected:
        defaultMode: 420
        sources:
        - serviceAccountToken:
            expirationSeconds: 3607
            path: token
  status:
    conditions:
    - lastProbeTime: null
      lastTransitionTime: "2026-11-30T10:00:01Z"
      status: "True"
      type: PodScheduled
    - lastProbeTime: null
      lastTransitionTime: "2026-11-30T10:00:05Z"
      status: "True"
      type: Ready
    hostIP: 10.0.{a}.{b}
    phase: Running
    podIP: 10.1.{a}.{b}
    qosClass: Burstable
    startTime: "2026-11-30T10:00:01Z"
"#,
            m = (i / 60) % 60,
            s = i % 60,
            rs = format!("{:010x}", i / 10),
            team = i % 40,
            rv = 100_000 + i,
            node = i / 25,
            a = (i / 250) % 250,
            b = i % 250,
        );
    }
    out.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    out
}
