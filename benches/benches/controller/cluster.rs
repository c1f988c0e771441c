//! The benchmark's cluster as Kubernetes objects: full CPU nodes with running pods, one GPU
//! NodeGroup of 8-GPU machines (one DRA slice each), and gangs of one-GPU pods that only a
//! bought GPU node can run.

use serde_json::{Value, json};

/// Namespace of every pod.
pub const NAMESPACE: &str = "default";
/// The GPU NodeGroup the plan must buy from.
pub const GPU_GROUP: &str = "h200";
/// Running pods per node are spread evenly; each asks this many CPUs of a node's 32, so
/// ten pods leave no room for a 16-CPU gang member even without its GPU claim.
const RUNNING_POD_CPU: &str = "3";
/// Zones the CPU nodes are spread over.
const ZONES: [&str; 3] = ["us-east-1a", "us-east-1b", "us-east-1c"];

fn zone(i: usize) -> &'static str {
    ZONES[i % ZONES.len()]
}

/// Name of the `i`th existing node.
pub fn node_name(i: usize) -> String {
    format!("cpu-{i:05}")
}

/// An existing, Ready CPU node with no DRA devices and no node group.
pub fn node(i: usize) -> Value {
    let name = node_name(i);
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m7i.8xlarge",
                "topology.kubernetes.io/zone": zone(i),
            },
        },
        "spec": {"providerID": format!("aws:///{}/i-{i:017x}", zone(i))},
        "status": {
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "allocatable": {"cpu": "32", "memory": "125Gi", "pods": "110"},
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "lastHeartbeatTime": "2026-12-01T00:00:00Z",
                "lastTransitionTime": "2026-12-01T00:00:00Z",
            }],
        },
    })
}

/// The `i`th running pod, bound to node `i % nodes`, owned by a ReplicaSet as a Deployment's
/// pods are.
pub fn running_pod(i: usize, nodes: usize) -> Value {
    let app = format!("web-{}", i % 500);
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("run-{i:06}"),
            "namespace": NAMESPACE,
            "labels": {"app": app, "pod-template-hash": "5d8f7c9b4"},
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": format!("{app}-5d8f7c9b4"),
                "uid": format!("00000000-0000-4000-8000-{:012}", i % 500),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "nodeName": node_name(i % nodes.max(1)),
            "containers": [{
                "name": "app",
                "image": "registry.example.com/web:1.0",
                "resources": {"requests": {"cpu": RUNNING_POD_CPU, "memory": "12Gi"}},
            }],
        },
    })
}

/// The DeviceClass of the GPUs.
pub fn device_class() -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.nvidia.com\""}}]},
    })
}

/// One GPU per claim.
pub fn claim_template() -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [{
            "name": "gpu",
            "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1},
        }]}}},
    })
}

/// The GPU NodeGroup: 8 × H200 per machine, published as one slice, as
/// `testdata/nodegroups/h200-on-demand.yaml`, with room for every gang.
pub fn gpu_node_group(max_size: usize) -> Value {
    let devices: Vec<Value> = (0..8)
        .map(|i| {
            json!({
                "name": format!("gpu-{i}"),
                "attributes": {
                    "index": {"int": i},
                    "productName": {"string": "NVIDIA H200"},
                },
                "capacity": {"memory": {"value": "141Gi"}},
            })
        })
        .collect();
    json!({
        "apiVersion": "dra-autoscaler.io/v1alpha1",
        "kind": "NodeGroup",
        "metadata": {"name": GPU_GROUP},
        "spec": {
            "provider": "fake",
            "providerID": GPU_GROUP,
            "minSize": 0,
            "maxSize": max_size,
            "capacityType": "on-demand",
            "pricePerHour": 84.8,
            "template": {
                "labels": {
                    "node.kubernetes.io/instance-type": "p5e.48xlarge",
                    "topology.kubernetes.io/zone": "us-east-1a",
                },
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
                "capacity": {"cpu": "192", "memory": "2Ti", "pods": "110"},
                "allocatable": {"cpu": "191450m", "memory": "2000Gi", "pods": "110"},
                "resourceSlices": [{
                    "driver": "gpu.nvidia.com",
                    "pool": {"name": "", "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                }],
            },
        },
    })
}

/// Member `member` of gang `gang` (a Kueue plain-pod group of `size`): 16 CPUs and one GPU
/// through the claim template, so 8 members fill one bought machine.
pub fn gang_pod(gang: usize, member: usize, size: usize) -> Value {
    let group = format!("gang-{gang:04}");
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{group}-{member}"),
            "namespace": NAMESPACE,
            "labels": {"app": "trainer", "kueue.x-k8s.io/pod-group-name": group},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": size.to_string()},
        },
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "containers": [{
                "name": "trainer",
                "image": "registry.example.com/llm-trainer:1.0",
                "resources": {
                    "requests": {"cpu": "16", "memory": "200Gi"},
                    "claims": [{"name": "gpu"}],
                },
            }],
        },
    })
}

/// The status kube-scheduler writes on a pod it cannot place.
pub fn unschedulable_status() -> Value {
    json!({"status": {
        "phase": "Pending",
        "conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/10000 nodes are available: 10000 Insufficient cpu.",
            "lastTransitionTime": "2026-12-01T00:00:00Z",
        }],
    }})
}
