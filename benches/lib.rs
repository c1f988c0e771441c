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

pub mod karpenter;

/// The Internet-scale workload of issue #28 (100,000 full nodes, 50,000 pending pods, 18
/// node groups over 6 zones), written as `kubectl get -A -o json` prints a snapshot.
pub mod internet;

pub mod colocated;

/// The GPU-gang planning workload of the planner benchmark (b): pending
/// gangs of pods that each want one GPU partition through DRA, existing
/// nodes (every tenth with one partitionable GPU, the rest CPU-only) and
/// node groups of partitionable GPU nodes of different sizes and prices.
pub mod gangs;

/// The filter benchmark's cluster (issue: scheduler filters): 5,000 nodes in
/// 10 zones, every fifth a GPU node with 8 node-local GPUs, and pods of four
/// kinds in turn — plain, zone-spread (groups of 50), hostname anti-affinity
/// (groups of 20) and DRA (one GPU through a claim template, GPU nodes only).
pub mod mixed;

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

/// Runs `main` (a benchmark binary's `divan::main`) on a thread with the stack
/// the command line and the controller give the simulator and the planner
/// ([`dra_sim::STACK_BUDGET`]), so benchmarks time what production runs.
/// On a smaller stack (a process's main thread has 8 MiB) every CEL
/// compilation and evaluation first moves to a fresh stack segment (an mmap,
/// an mprotect and a munmap each), which made `gpu_gangs` 2.5 times slower.
pub fn on_planner_stack(main: fn()) {
    let worker = std::thread::Builder::new()
        .name("bench".to_string())
        .stack_size(dra_sim::STACK_BUDGET)
        .spawn(main);
    match worker {
        Ok(handle) => {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        // Without a thread of our own, the slower path still gives correct figures.
        Err(_) => main(),
    }
}
