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
