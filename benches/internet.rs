//! The Internet-scale workload (issue #28): a cluster of `nodes` nodes, every one of them
//! full, and a burst of pending pods half as many as the nodes, as `kubectl get -A -o json`
//! prints them (a `kind: List` with metadata, spec and status; managed fields only when
//! asked for, as the API server serves them to a watch).
//!
//! At 100,000 nodes:
//!
//! - 18 NodeGroups over 6 zones, three shapes per zone: `cpu-m` (16 CPUs, 64 GiB, 0.80/h),
//!   `cpu-xl` (64 CPUs, 256 GiB, 3.20/h) and `gpu` (96 CPUs, 1 TiB, 8 GPUs published through
//!   one DRA ResourceSlice, 40/h, tainted `nvidia.com/gpu`). Each group has a fifth of its
//!   current size left before `maxSize`, so every group can grow.
//! - 100,000 nodes: 10,000 GPU nodes (each with its 8-GPU ResourceSlice), 45,000 `cpu-m` and
//!   45,000 `cpu-xl`, spread evenly over the groups of their shape.
//! - Every node is full: it runs one pod of a ReplicaSet that requests all its CPUs and memory;
//!   on a GPU node that pod also holds all 8 GPUs through an allocated ResourceClaim.
//! - 50,000 pending pods: 40,000 singles of five sizes (250m/512Mi, 500m/1Gi, 1/2Gi, 2/4Gi,
//!   4/8Gi, 8,000 each, in 40 namespaces) and 1,250 coscheduling gangs (`PodGroup`
//!   `minMember: 8`) of 8 pods that each want one GPU (a claim from a template), 8 CPUs and
//!   64 GiB, and tolerate the GPU taint.
//!
//! Everything scales with `nodes`: at 10,000 nodes, 1,000 GPU nodes, 5,000 pending pods in
//! 4,000 singles and 125 gangs. Object names, uids and times are deterministic, so the plan
//! of a given size is the same on every run.

use std::io::{self, Write};

use serde_json::{Value, json};

/// Zones of the cluster (6).
pub const ZONES: [&str; 6] = [
    "us-east-1a",
    "us-east-1b",
    "us-east-1c",
    "us-east-1d",
    "us-east-1e",
    "us-east-1f",
];

/// The GPU driver and DeviceClass.
pub const GPU_DRIVER: &str = "gpu.nvidia.com";

/// A node shape: name prefix, CPUs, memory, GPUs, price per hour.
struct Shape {
    name: &'static str,
    instance_type: &'static str,
    cpu: u32,
    memory_gi: u32,
    gpus: usize,
    price: f64,
}

const SHAPES: [Shape; 3] = [
    Shape {
        name: "cpu-m",
        instance_type: "m7i.4xlarge",
        cpu: 16,
        memory_gi: 64,
        gpus: 0,
        price: 0.8,
    },
    Shape {
        name: "cpu-xl",
        instance_type: "m7i.16xlarge",
        cpu: 64,
        memory_gi: 256,
        gpus: 0,
        price: 3.2,
    },
    Shape {
        name: "gpu",
        instance_type: "p5.48xlarge",
        cpu: 96,
        memory_gi: 1024,
        gpus: 8,
        price: 40.0,
    },
];

/// Pending single pods' sizes: CPU and memory requests.
const SINGLE_SIZES: [(&str, &str); 5] = [
    ("250m", "512Mi"),
    ("500m", "1Gi"),
    ("1", "2Gi"),
    ("2", "4Gi"),
    ("4", "8Gi"),
];

/// Pods per gang.
pub const GANG_SIZE: usize = 8;

/// How many objects of each kind a workload of `nodes` nodes has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Nodes (and running pods: one per node).
    pub nodes: usize,
    /// GPU nodes (and their ResourceSlices and allocated claims).
    pub gpu_nodes: usize,
    /// Pending single pods.
    pub singles: usize,
    /// Pending gangs of [`GANG_SIZE`].
    pub gangs: usize,
}

impl Counts {
    /// The counts for `nodes` nodes.
    #[must_use]
    pub fn of(nodes: usize) -> Self {
        Counts {
            nodes,
            gpu_nodes: nodes / 10,
            singles: nodes * 2 / 5,
            gangs: nodes / 80,
        }
    }

    /// Pending pods in all.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.singles + self.gangs * GANG_SIZE
    }
}

/// The shape index and zone of node `n` (GPU nodes are every tenth).
fn node_shape(n: usize) -> (usize, usize) {
    let shape = if n % 10 == 9 { 2 } else { n % 2 };
    // Spread each shape over the zones in turn.
    let zone = (n / 10) % ZONES.len();
    (shape, zone)
}

fn group_name(shape: usize, zone: usize) -> String {
    format!("{}-{}", SHAPES[shape].name, ZONES[zone])
}

fn node_name(n: usize) -> String {
    // As EC2 names nodes: by private address.
    format!(
        "ip-10-{}-{}-{}.ec2.internal",
        n >> 16,
        (n >> 8) & 255,
        n & 255
    )
}

/// Deterministic uid for object `i` of kind `kind` (a small number).
fn uid(kind: u32, i: usize) -> String {
    format!("{kind:08x}-0000-4000-8000-{i:012x}")
}

fn time(seconds: usize) -> String {
    let (h, m, s) = (10 + seconds / 3600 % 14, seconds / 60 % 60, seconds % 60);
    format!("2026-11-30T{h:02}:{m:02}:{s:02}Z")
}

fn gpu_devices() -> Vec<Value> {
    (0..8)
        .map(|i| {
            json!({
                "name": format!("gpu-{i}"),
                "attributes": {
                    "index": {"int": i},
                    "productName": {"string": "NVIDIA H100 80GB HBM3"},
                    "architecture": {"string": "Hopper"},
                    "driverVersion": {"version": "570.86.15"},
                    "resource.kubernetes.io/pcieRoot": {"string": format!("pci0000:{:02x}", i / 2 * 0x20)}
                },
                "capacity": {"memory": {"value": "80Gi"}}
            })
        })
        .collect()
}

fn node_group(shape: usize, zone: usize, current: usize) -> Value {
    let s = &SHAPES[shape];
    let name = group_name(shape, zone);
    let mut template = json!({
        "labels": {
            "node.kubernetes.io/instance-type": s.instance_type,
            "topology.kubernetes.io/zone": ZONES[zone],
            "topology.kubernetes.io/region": "us-east-1",
        },
        "capacity": {"cpu": s.cpu.to_string(), "memory": format!("{}Gi", s.memory_gi), "pods": "110"},
    });
    if s.gpus > 0 {
        template["taints"] =
            json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]);
        template["resourceSlices"] = json!([{
            "driver": GPU_DRIVER,
            "pool": {"name": "", "generation": 1, "resourceSliceCount": 1},
            "devices": gpu_devices(),
        }]);
    }
    json!({
        "apiVersion": "dra-autoscaler.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": name, "uid": uid(1, shape * 10 + zone), "resourceVersion": "1000"},
        "spec": {
            "provider": "fake",
            "providerID": name,
            "minSize": 0,
            "maxSize": current + current / 5 + 10,
            "capacityType": "on-demand",
            "pricePerHour": s.price,
            "topologyDomain": {"key": "topology.kubernetes.io/zone", "value": ZONES[zone]},
            "template": template,
        }
    })
}

fn managed_fields(manager: &str, operation: &str, at: &str, fields: Value) -> Value {
    json!({
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        "manager": manager,
        "operation": operation,
        "time": at,
    })
}

fn node(n: usize) -> Value {
    let (shape, zone) = node_shape(n);
    let s = &SHAPES[shape];
    let name = node_name(n);
    let created = time(n % 3600);
    let resources = json!({
        "cpu": s.cpu.to_string(),
        "ephemeral-storage": "194314260Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": format!("{}Gi", s.memory_gi),
        "pods": "110",
    });
    let condition = |kind: &str, status: &str, reason: &str, message: &str| {
        json!({"type": kind, "status": status, "lastHeartbeatTime": "2026-11-30T12:00:00Z",
               "lastTransitionTime": created, "reason": reason, "message": message})
    };
    let address = format!("10.{}.{}.{}", n >> 16, (n >> 8) & 255, n & 255);
    let mut spec = json!({
        "providerID": format!("aws:///{}/i-{:017x}", ZONES[zone], 0x0abc_0000_0000_0000_u64 + n as u64),
    });
    if s.gpus > 0 {
        spec["taints"] =
            json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": address,
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true"
            },
            "creationTimestamp": created,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": s.instance_type,
                "beta.kubernetes.io/os": "linux",
                "dra-autoscaler.io/node-group": group_name(shape, zone),
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": s.instance_type,
                "topology.kubernetes.io/region": "us-east-1",
                "topology.kubernetes.io/zone": ZONES[zone]
            },
            "managedFields": [
                managed_fields("kubelet", "Update", &created, json!({
                    "f:metadata": {"f:annotations": {".": {}, "f:alpha.kubernetes.io/provided-node-ip": {},
                        "f:volumes.kubernetes.io/controller-managed-attach-detach": {}},
                        "f:labels": {".": {}, "f:beta.kubernetes.io/arch": {}, "f:beta.kubernetes.io/os": {},
                        "f:kubernetes.io/arch": {}, "f:kubernetes.io/hostname": {}, "f:kubernetes.io/os": {}}},
                    "f:spec": {"f:providerID": {}}})),
                managed_fields("kubelet", "Update", "2026-11-30T12:00:00Z", json!({
                    "f:status": {"f:allocatable": {"f:cpu": {}, "f:memory": {}, "f:pods": {}},
                        "f:capacity": {"f:cpu": {}, "f:memory": {}, "f:pods": {}},
                        "f:conditions": {"k:{\"type\":\"DiskPressure\"}": {"f:lastHeartbeatTime": {}},
                            "k:{\"type\":\"MemoryPressure\"}": {"f:lastHeartbeatTime": {}},
                            "k:{\"type\":\"PIDPressure\"}": {"f:lastHeartbeatTime": {}},
                            "k:{\"type\":\"Ready\"}": {"f:lastHeartbeatTime": {}, "f:message": {}}},
                        "f:images": {}, "f:nodeInfo": {"f:bootID": {}}}}))
            ],
            "name": name,
            "resourceVersion": (2_000_000 + n).to_string(),
            "uid": uid(2, n)
        },
        "spec": spec,
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": address},
                {"type": "InternalDNS", "address": name},
                {"type": "Hostname", "address": name}
            ],
            "allocatable": resources,
            "capacity": resources,
            "conditions": [
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                condition("Ready", "True", "KubeletReady", "kubelet is posting ready status")
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": [
                {"names": ["registry.example.com/worker@sha256:4b1f0c3e9a1e2b3c4b1f0c3e9a1e2b3c4b1f0c3e9a1e2b3c4b1f0c3e9a1e2b3c",
                           "registry.example.com/worker:1.2.3"], "sizeBytes": 183_442_112},
                {"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320_368}
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": uid(3, n),
                "containerRuntimeVersion": "containerd://2.0.5",
                "kernelVersion": "6.1.140-154.222.amzn2023.x86_64",
                "kubeProxyVersion": "",
                "kubeletVersion": "v1.35.0",
                "machineID": format!("ec2{:029x}", n),
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.7.20250527",
                "systemUUID": format!("ec2{:05x}-0000-0000-0000-{:012x}", n >> 20, n)
            }
        }
    })
}

fn slice(n: usize) -> Value {
    let name = node_name(n);
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "creationTimestamp": time(n % 3600),
            "generateName": format!("{name}-{GPU_DRIVER}-"),
            "name": format!("{name}-{GPU_DRIVER}-{:05x}", n),
            "ownerReferences": [{"apiVersion": "v1", "controller": true, "kind": "Node", "name": name, "uid": uid(2, n)}],
            "resourceVersion": (3_000_000 + n).to_string(),
            "uid": uid(4, n)
        },
        "spec": {
            "driver": GPU_DRIVER,
            "nodeName": name,
            "pool": {"generation": 1, "name": name, "resourceSliceCount": 1},
            "devices": gpu_devices()
        }
    })
}

/// A pod of a ReplicaSet as kubectl prints it. `node`: bound there and running; otherwise
/// pending and marked unschedulable by the scheduler.
fn pod(
    name: &str,
    namespace: &str,
    i: usize,
    node: Option<&str>,
    requests: (&str, &str),
    extra: impl FnOnce(&mut Value),
) -> Value {
    let created = time(i % 36_000);
    let rs = name.rsplit_once('-').map_or(name, |(rs, _)| rs);
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": created,
            "generateName": format!("{rs}-"),
            "labels": {"app": rs, "pod-template-hash": "7d9f8b6c5d"},
            "managedFields": [managed_fields("kube-controller-manager", "Update", &created, json!({
                "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                    "f:ownerReferences": {".": {}, "k:{\"uid\":\"\"}": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {},
                    "f:name": {}, "f:resources": {".": {}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}}},
                    "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {},
                    "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}}))],
            "name": name,
            "namespace": namespace,
            "ownerReferences": [{"apiVersion": "apps/v1", "blockOwnerDeletion": true, "controller": true,
                                 "kind": "ReplicaSet", "name": rs, "uid": uid(5, i / 100)}],
            "resourceVersion": (5_000_000 + i).to_string(),
            "uid": uid(6, i)
        },
        "spec": {
            "containers": [{
                "image": "registry.example.com/worker:1.2.3",
                "imagePullPolicy": "IfNotPresent",
                "name": "main",
                "resources": {"requests": {"cpu": requests.0, "memory": requests.1}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                  "name": format!("kube-api-access-{:05x}", i % 0xfffff), "readOnly": true}]
            }],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}
            ],
            "volumes": [{"name": format!("kube-api-access-{:05x}", i % 0xfffff), "projected": {"defaultMode": 420,
                "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}]
        },
        "status": {}
    });
    match node {
        Some(node) => {
            pod["spec"]["nodeName"] = json!(node);
            pod["status"] = json!({
                "conditions": [
                    {"lastProbeTime": null, "lastTransitionTime": created, "status": "True", "type": "PodScheduled"},
                    {"lastProbeTime": null, "lastTransitionTime": created, "status": "True", "type": "Initialized"},
                    {"lastProbeTime": null, "lastTransitionTime": created, "status": "True", "type": "ContainersReady"},
                    {"lastProbeTime": null, "lastTransitionTime": created, "status": "True", "type": "Ready"}
                ],
                "containerStatuses": [{"containerID": format!("containerd://{:064x}", i), "image": "registry.example.com/worker:1.2.3",
                    "imageID": "registry.example.com/worker@sha256:4b1f0c3e9a1e2b3c4b1f0c3e9a1e2b3c4b1f0c3e9a1e2b3c4b1f0c3e9a1e2b3c",
                    "lastState": {}, "name": "main", "ready": true, "restartCount": 0, "started": true,
                    "state": {"running": {"startedAt": created}}}],
                "hostIP": "10.0.0.1",
                "phase": "Running",
                "podIP": format!("100.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255),
                "qosClass": "Burstable",
                "startTime": created
            });
        }
        None => {
            pod["status"] = json!({
                "conditions": [{"lastProbeTime": null, "lastTransitionTime": created,
                    "message": "0/100000 nodes are available: 100000 Insufficient cpu. preemption: 0/100000 nodes are available: 100000 No preemption victims found for incoming pod.",
                    "reason": "Unschedulable", "status": "False", "type": "PodScheduled"}],
                "phase": "Pending",
                "qosClass": "Burstable"
            });
        }
    }
    extra(&mut pod);
    pod
}

fn gpu_toleration(pod: &mut Value) {
    if let Some(tolerations) = pod["spec"]["tolerations"].as_array_mut() {
        tolerations
            .push(json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}));
    }
}

fn running_pod(n: usize) -> Value {
    let (shape, _) = node_shape(n);
    let s = &SHAPES[shape];
    let node = node_name(n);
    let name = format!("{}-{:06}", s.name, n);
    let (cpu, memory) = (s.cpu.to_string(), format!("{}Gi", s.memory_gi));
    pod(&name, "fleet", n, Some(&node), (&cpu, &memory), |pod| {
        if s.gpus > 0 {
            gpu_toleration(pod);
            pod["spec"]["resourceClaims"] =
                json!([{"name": "gpus", "resourceClaimTemplateName": "eight-gpus"}]);
            pod["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpus"}]);
            pod["status"]["resourceClaimStatuses"] =
                json!([{"name": "gpus", "resourceClaimName": format!("{name}-gpus")}]);
        }
    })
}

fn running_claim(n: usize) -> Value {
    let (shape, _) = node_shape(n);
    let pod = format!("{}-{:06}", SHAPES[shape].name, n);
    let node = node_name(n);
    let results: Vec<Value> = (0..8)
        .map(|d| json!({"request": "gpus", "driver": GPU_DRIVER, "pool": node, "device": format!("gpu-{d}")}))
        .collect();
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpus"},
            "creationTimestamp": time(n % 36_000),
            "generateName": format!("{pod}-gpus-"),
            "name": format!("{pod}-gpus"),
            "namespace": "fleet",
            "ownerReferences": [{"apiVersion": "v1", "blockOwnerDeletion": true, "controller": true,
                                 "kind": "Pod", "name": pod, "uid": uid(6, n)}],
            "resourceVersion": (6_000_000 + n).to_string(),
            "uid": uid(7, n)
        },
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": GPU_DRIVER, "allocationMode": "ExactCount", "count": 8}}]}},
        "status": {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
            },
            "reservedFor": [{"resource": "pods", "name": pod, "uid": uid(6, n)}]
        }
    })
}

fn single(i: usize, nodes: usize) -> Value {
    let (cpu, memory) = SINGLE_SIZES[i % SINGLE_SIZES.len()];
    let namespace = format!("team-{:02}", i % 40);
    let name = format!("web-{:03}-{:06}", (i / 5) % 400, i);
    pod(&name, &namespace, nodes + i, None, (cpu, memory), |_| {})
}

fn gang_member(g: usize, m: usize, index: usize) -> Value {
    let group = format!("train-{g:05}");
    let name = format!("{group}-{m}");
    pod(&name, "ml", index, None, ("8", "64Gi"), |pod| {
        gpu_toleration(pod);
        pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = json!(group);
        pod["spec"]["resourceClaims"] =
            json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
        pod["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
        pod["spec"]["schedulerName"] = json!("scheduler-plugins-scheduler");
    })
}

fn pod_group(g: usize) -> Value {
    json!({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": format!("train-{g:05}"), "namespace": "ml", "uid": uid(8, g),
                     "creationTimestamp": time(g), "resourceVersion": (7_000_000 + g).to_string()},
        "spec": {"minMember": GANG_SIZE, "scheduleTimeoutSeconds": 600},
        "status": {"phase": "Pending"}
    })
}

fn shared_objects() -> Vec<Value> {
    let template = |name: &str, count: u32| {
        json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": if count == 8 { "fleet" } else { "ml" }},
            "spec": {"spec": {"devices": {"requests": [{"name": if count == 8 { "gpus" } else { "gpu" },
                "exactly": {"deviceClassName": GPU_DRIVER, "allocationMode": "ExactCount", "count": count,
                    "selectors": [{"cel": {"expression":
                        format!("device.capacity[\"{GPU_DRIVER}\"].memory.compareTo(quantity(\"40Gi\")) >= 0")}}]}}]}}}
        })
    };
    let mut objects = vec![json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": GPU_DRIVER},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{GPU_DRIVER}\"")}}]}
    })];
    objects.push(template("eight-gpus", 8));
    objects.push(template("one-gpu", 1));
    for ns in ["fleet", "ml"]
        .into_iter()
        .map(String::from)
        .chain((0..40).map(|t| format!("team-{t:02}")))
    {
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}));
    }
    objects
}

/// Every object of the workload of `nodes` nodes, in the order `kubectl get` would list
/// them kind by kind, handed to `each` one at a time (the 100,000-node workload is too large
/// to hold as JSON values at once). `managed_fields`: keep `metadata.managedFields` on
/// Nodes and Pods, as the API server serves them to a watch; `kubectl get` hides them
/// (`--show-managed-fields=false` is its default), so snapshot files have none.
///
/// # Errors
/// Whatever `each` returns.
pub fn for_each_object<E>(
    nodes: usize,
    managed_fields: bool,
    mut each: impl FnMut(Value) -> Result<(), E>,
) -> Result<(), E> {
    let mut each = |mut object: Value| {
        if !managed_fields && let Some(meta) = object["metadata"].as_object_mut() {
            meta.remove("managedFields");
        }
        each(object)
    };
    let counts = Counts::of(nodes);
    for object in shared_objects() {
        each(object)?;
    }
    let mut per_group = [[0usize; ZONES.len()]; SHAPES.len()];
    for n in 0..nodes {
        let (shape, zone) = node_shape(n);
        per_group[shape][zone] += 1;
    }
    for (shape, zones) in per_group.iter().enumerate() {
        for (zone, &current) in zones.iter().enumerate() {
            each(node_group(shape, zone, current))?;
        }
    }
    for n in 0..nodes {
        each(node(n))?;
    }
    for n in (0..nodes).filter(|&n| node_shape(n).0 == 2) {
        each(slice(n))?;
    }
    for n in 0..nodes {
        each(running_pod(n))?;
    }
    for n in (0..nodes).filter(|&n| node_shape(n).0 == 2) {
        each(running_claim(n))?;
    }
    for i in 0..counts.singles {
        each(single(i, nodes))?;
    }
    for g in 0..counts.gangs {
        each(pod_group(g))?;
        for m in 0..GANG_SIZE {
            each(gang_member(
                g,
                m,
                nodes + counts.singles + g * GANG_SIZE + m,
            ))?;
        }
    }
    Ok(())
}

/// Writes the workload of `nodes` nodes to `out` as one `kind: List` JSON document, as
/// `kubectl get -A -o json` prints a snapshot (compact, one object per line).
///
/// # Errors
/// A write error.
pub fn write_json(nodes: usize, out: &mut impl Write) -> io::Result<()> {
    out.write_all(b"{\"apiVersion\":\"v1\",\"kind\":\"List\",\"metadata\":{\"resourceVersion\":\"\"},\"items\":[\n")?;
    let mut first = true;
    for_each_object(nodes, false, |object| {
        if !first {
            out.write_all(b",\n")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, &object).map_err(io::Error::other)
    })?;
    out.write_all(b"\n]}\n")
}

/// The workload of `nodes` nodes as JSON text (see [`write_json`]).
#[must_use]
pub fn json_text(nodes: usize) -> String {
    let mut out = Vec::new();
    // Writing to memory cannot fail.
    let _ = write_json(nodes, &mut out);
    String::from_utf8(out).unwrap_or_default()
}
