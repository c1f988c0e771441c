//! What nothing downstream reads of an object, dropped as it is loaded or watched.
//!
//! A snapshot of 100,000 nodes and 150,000 pods holds every object in memory, several
//! times over while it is planned (issue #28). Much of each object is what kubelet and
//! the controllers write for people and for themselves: a node's image list, system info
//! and addresses, a pod's container statuses and IPs, every container's environment,
//! mounts and probes, the service-account volume of each pod, and `managedFields`
//! everywhere. The fit logic (this crate), the planner, the scale-down analysis and the
//! controller read none of it, so callers that hold many objects (`simulate`, the
//! controller's watches) drop it with these functions.
//!
//! What is kept is everything any of them reads: labels, annotations, owners, times and
//! finalizers; a node's spec, allocatable, capacity and conditions; a pod's scheduling
//! fields, containers' names, ports, resources and restart policies, local volumes
//! (hostPath and disk-backed emptyDir, which block scale-down), and its phase,
//! conditions, nominated node, resize status and claim statuses. A field that someone
//! starts to read must come off the lists below.

use k8s_openapi::api::core::v1::{Container, Node, Pod, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Drops `managedFields` (server-side apply bookkeeping, often the largest part of an
/// object as the API server serves it).
pub fn meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
}

/// Drops what nothing reads of a Node: its managed fields and, of its status, images,
/// system info, addresses, daemon endpoints, attached volumes, runtime handlers,
/// features and config.
pub fn node(node: &mut Node) {
    self::meta(&mut node.metadata);
    if let Some(status) = node.status.as_mut() {
        status.images = None;
        status.node_info = None;
        status.addresses = None;
        status.daemon_endpoints = None;
        status.volumes_attached = None;
        status.volumes_in_use = None;
        status.runtime_handlers = None;
        status.features = None;
        status.config = None;
    }
}

/// Drops what nothing reads of a Pod: its managed fields; of each container, what runs in
/// it (command, arguments, environment, mounts, probes, lifecycle hooks, security
/// context, termination message settings); volumes other than local ones; and, of its
/// status, container statuses, IPs and start time.
pub fn pod(pod: &mut Pod) {
    self::meta(&mut pod.metadata);
    if let Some(spec) = pod.spec.as_mut() {
        for container in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            self::container(container);
        }
        // Ephemeral containers hold no resources and are never scheduled.
        spec.ephemeral_containers = None;
        if let Some(volumes) = spec.volumes.as_mut() {
            volumes.retain(is_local);
        }
    }
    if let Some(status) = pod.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
        status.host_ip = None;
        status.host_ips = None;
        status.pod_ip = None;
        status.pod_ips = None;
        status.start_time = None;
    }
}

fn container(container: &mut Container) {
    container.command = None;
    container.args = None;
    container.env = None;
    container.env_from = None;
    container.volume_mounts = None;
    container.volume_devices = None;
    container.liveness_probe = None;
    container.readiness_probe = None;
    container.startup_probe = None;
    container.lifecycle = None;
    container.security_context = None;
    container.termination_message_path = None;
    container.termination_message_policy = None;
    container.working_dir = None;
}

/// A volume on the node's own disk (hostPath, or an emptyDir not in memory): scale-down
/// does not move pods that have one (see `dra_plan::scaledown::eligibility`).
fn is_local(volume: &Volume) -> bool {
    volume.host_path.is_some()
        || volume
            .empty_dir
            .as_ref()
            .is_some_and(|e| e.medium.as_deref() != Some("Memory"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_keeps_what_scheduling_and_scale_down_read() {
        let full: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "labels": {"app": "a"},
                "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true}],
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]},
            "spec": {
                "nodeName": "n1", "priority": 5, "nodeSelector": {"zone": "a"},
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "containers": [{"name": "main", "image": "w:1", "command": ["run"], "args": ["--x"],
                    "env": [{"name": "A", "value": "b"}], "ports": [{"containerPort": 80, "hostPort": 80}],
                    "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
                    "volumeMounts": [{"name": "token", "mountPath": "/t"}],
                    "livenessProbe": {"exec": {"command": ["true"]}}}],
                "initContainers": [{"name": "sidecar", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}}, "env": [{"name": "B"}]}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                "volumes": [{"name": "token", "projected": {"sources": []}},
                            {"name": "scratch", "emptyDir": {}},
                            {"name": "shm", "emptyDir": {"medium": "Memory"}},
                            {"name": "host", "hostPath": {"path": "/var"}}]},
            "status": {"phase": "Running", "nominatedNodeName": "n2",
                "conditions": [{"type": "Ready", "status": "True"}],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu"}],
                "containerStatuses": [{"name": "main", "image": "w:1", "imageID": "", "ready": true, "restartCount": 0}],
                "podIP": "10.0.0.1", "hostIP": "10.1.0.1", "startTime": "2026-11-30T10:00:00Z"}
        }))
        .unwrap();
        let mut trimmed = full.clone();
        pod(&mut trimmed);
        let expected: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml", "labels": {"app": "a"},
                "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u", "controller": true}]},
            "spec": {
                "nodeName": "n1", "priority": 5, "nodeSelector": {"zone": "a"},
                "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "containers": [{"name": "main", "image": "w:1", "ports": [{"containerPort": 80, "hostPort": 80}],
                    "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]}}],
                "initContainers": [{"name": "sidecar", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}}}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "host", "hostPath": {"path": "/var"}}]},
            "status": {"phase": "Running", "nominatedNodeName": "n2",
                "conditions": [{"type": "Ready", "status": "True"}],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu"}]}
        }))
        .unwrap();
        assert_eq!(trimmed, expected);
    }

    #[test]
    fn a_node_keeps_its_spec_resources_and_conditions() {
        let full: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "labels": {"zone": "a"}, "annotations": {"x": "y"},
                "managedFields": [{"manager": "kubelet"}]},
            "spec": {"providerID": "aws:///a/i-1", "unschedulable": true,
                "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4"}, "capacity": {"cpu": "4"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                "images": [{"names": ["a"], "sizeBytes": 1}],
                "nodeInfo": {"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "",
                    "kernelVersion": "", "kubeProxyVersion": "", "kubeletVersion": "", "machineID": "",
                    "operatingSystem": "linux", "osImage": "", "systemUUID": ""},
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}
        }))
        .unwrap();
        let mut trimmed = full;
        node(&mut trimmed);
        let expected: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "labels": {"zone": "a"}, "annotations": {"x": "y"}},
            "spec": {"providerID": "aws:///a/i-1", "unschedulable": true,
                "taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4"}, "capacity": {"cpu": "4"},
                "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        assert_eq!(trimmed, expected);
    }
}
