//! The first-fit scan memo: pods with the same scheduling signature are
//! refused by the same full nodes, so a scan can start where the last one
//! found room (cursors are undone by rollback).

use super::{Snapshot, Undo};

impl Snapshot {
    /// A hash of everything about a pod that decides where it fits, when that
    /// only gets worse as pods are placed (monotonic): pods with the same
    /// signature are refused by the same full nodes, so a scan can start
    /// where the last one found room. Pods with topology spread or required
    /// pod affinity get `None`: placing pods can make nodes fit them again.
    pub fn signature(&mut self, pod_index: usize) -> Option<u64> {
        use std::hash::Hasher;
        if self.signatures.len() < self.pods.len() {
            self.signatures.resize(self.pods.len(), None);
        }
        if let Some(known) = self.signatures[pod_index] {
            return known;
        }
        let labels_matter = self.labels_matter;
        let pod = &mut self.pods[pod_index];
        let computed = pod.spec.as_mut().and_then(|spec| {
            let non_monotonic = spec
                .topology_spread_constraints
                .as_ref()
                .is_some_and(|c| !c.is_empty())
                || spec
                    .affinity
                    .as_ref()
                    .and_then(|a| a.pod_affinity.as_ref())
                    .is_some();
            if non_monotonic {
                return None;
            }
            let labels = if labels_matter {
                pod.metadata.labels.as_ref()
            } else {
                None
            };
            let namespace = if labels_matter || namespace_matters(spec) {
                pod.metadata.namespace.as_ref()
            } else {
                None
            };
            // Fields no filter reads are moved out while the spec is
            // serialised and put back after (no copy of the spec): they
            // differ from pod to pod (a pod's own `kube-api-access-*`
            // volume, a StatefulSet pod's hostname) and would make every
            // pod its own signature, so every scan would start at the first
            // node. The node name is where a pod went, not what it needs.
            let unread = UnreadFields::take(spec);
            // Serialised into one reused buffer, hashed in one call.
            let buffer = &mut self.signature_buffer;
            buffer.clear();
            let written = serde_json::to_writer(&mut *buffer, &(namespace, labels, &*spec));
            unread.put_back(spec);
            written.ok()?;
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            hasher.write(buffer);
            Some(hasher.finish())
        });
        self.signatures[pod_index] = Some(computed);
        computed
    }

    /// Whether any pod has required anti-affinity, so that a pod's labels (and
    /// not just its spec) decide where it fits.
    #[must_use]
    pub fn labels_matter(&self) -> bool {
        self.labels_matter
    }

    /// The signature a first-fit scan for the pod may use with
    /// [`Snapshot::scan_start`] and [`Snapshot::refused_before`], given its
    /// resolved claims: `None` while the pod still has to allocate a claim it
    /// names (`resourceClaimName`). Such a claim is shared by name, so once a
    /// pod allocates it, the next pod with the same signature finds it
    /// allocated and may fit a node that refused the first one (the claim no
    /// longer needs devices there): its fit got better, not worse. Found by
    /// the differential test against kube-scheduler v1.37.2 (seed 3 clusters
    /// 608092, 582230, 39363; case 144).
    pub fn cursor_signature(&mut self, pod_index: usize, claims: &super::PodClaims) -> Option<u64> {
        let names_claim_to_allocate = self.pods[pod_index]
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|c| c.resource_claim_name.as_deref())
            .any(|name| claims.to_allocate.iter().any(|k| k.name == name));
        if names_claim_to_allocate {
            return None;
        }
        self.signature(pod_index)
    }

    /// Where a first-fit scan for a pod of `signature` may start.
    #[must_use]
    pub fn scan_start(&self, signature: Option<u64>) -> usize {
        signature
            .and_then(|s| self.cursors.get(&s).copied())
            .unwrap_or(0)
    }

    /// Records that every node before `node_index` refused a pod of
    /// `signature` (undone by rollback).
    pub fn refused_before(&mut self, signature: Option<u64>, node_index: usize) {
        let Some(signature) = signature else {
            return;
        };
        let previous = self.cursors.get(&signature).copied();
        if previous.is_some_and(|p| p >= node_index) {
            return;
        }
        self.cursors.insert(signature, node_index);
        self.undo.push(Undo::Cursor {
            signature,
            previous,
        });
    }
}

/// Whether the pod's namespace can decide where it fits: its claims (and
/// their templates) live there, its anti-affinity terms default to it, and
/// extended resources may be backed by a claim made there. Pods that differ
/// only in namespace otherwise fit on the same nodes.
fn namespace_matters(spec: &k8s_openapi::api::core::v1::PodSpec) -> bool {
    let extended = |c: &k8s_openapi::api::core::v1::Container| {
        c.resources.as_ref().is_some_and(|r| {
            [&r.requests, &r.limits]
                .into_iter()
                .flatten()
                .any(|list| list.keys().any(|k| k.contains('/')))
        })
    };
    spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
        || spec
            .affinity
            .as_ref()
            .is_some_and(|a| a.pod_anti_affinity.is_some())
        || spec.containers.iter().any(extended)
        || spec.init_containers.iter().flatten().any(extended)
}

/// The parts of a pod spec that no filter of the simulator reads and that
/// commonly differ between otherwise identical pods, moved out of the spec
/// for the time its signature is computed.
struct UnreadFields {
    node_name: Option<String>,
    hostname: Option<String>,
    subdomain: Option<String>,
    volumes: Option<Vec<k8s_openapi::api::core::v1::Volume>>,
    /// Per container (then init container): mounts, devices, env, env from.
    containers: Vec<ContainerUnread>,
}

type ContainerUnread = (
    Option<Vec<k8s_openapi::api::core::v1::VolumeMount>>,
    Option<Vec<k8s_openapi::api::core::v1::VolumeDevice>>,
    Option<Vec<k8s_openapi::api::core::v1::EnvVar>>,
    Option<Vec<k8s_openapi::api::core::v1::EnvFromSource>>,
);

impl UnreadFields {
    fn take(spec: &mut k8s_openapi::api::core::v1::PodSpec) -> Self {
        let containers = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
            .map(|c| {
                (
                    c.volume_mounts.take(),
                    c.volume_devices.take(),
                    c.env.take(),
                    c.env_from.take(),
                )
            })
            .collect();
        UnreadFields {
            node_name: spec.node_name.take(),
            hostname: spec.hostname.take(),
            subdomain: spec.subdomain.take(),
            volumes: spec.volumes.take(),
            containers,
        }
    }

    fn put_back(self, spec: &mut k8s_openapi::api::core::v1::PodSpec) {
        spec.node_name = self.node_name;
        spec.hostname = self.hostname;
        spec.subdomain = self.subdomain;
        spec.volumes = self.volumes;
        let containers = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten());
        for (c, (mounts, devices, env, env_from)) in containers.zip(self.containers) {
            c.volume_mounts = mounts;
            c.volume_devices = devices;
            c.env = env;
            c.env_from = env_from;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use crate::gates::FeatureGates;
    use crate::objects::ClusterObjects;
    use crate::snapshot::Snapshot;

    fn pod(name: &str, namespace: &str, cpu: &str, extra: serde_json::Value) -> Pod {
        let mut value = json!({
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": "worker:1",
                "resources": {"requests": {"cpu": cpu}},
                "volumeMounts": [{"name": format!("kube-api-access-{name}"), "mountPath": "/var/run/secrets"}],
                "env": [{"name": "POD", "value": name}]}],
                "hostname": name,
                "volumes": [{"name": format!("kube-api-access-{name}"), "projected": {"sources": []}}]}
        });
        if let (Some(spec), Some(more)) = (value["spec"].as_object_mut(), extra.as_object()) {
            spec.extend(more.clone());
        }
        serde_json::from_value(value).unwrap()
    }

    fn snapshot(pods: Vec<Pod>) -> Snapshot {
        Snapshot::new(
            ClusterObjects {
                pods,
                ..ClusterObjects::default()
            },
            FeatureGates::default(),
        )
    }

    #[test]
    fn pods_that_differ_only_in_what_no_filter_reads_share_a_signature() {
        // Each pod of a ReplicaSet has its own service-account volume and mount, and a
        // StatefulSet pod its own hostname; none of it decides where the pod fits, nor
        // does the namespace of a pod without claims in a cluster without anti-affinity.
        let pods = vec![
            pod("a", "team-1", "1", json!({})),
            pod("b", "team-2", "1", json!({})),
            pod("c", "team-1", "2", json!({})),
            pod("d", "team-1", "1", json!({"nodeSelector": {"zone": "a"}})),
        ];
        let before: Vec<Pod> = pods.clone();
        let mut snapshot = snapshot(pods);
        let signatures: Vec<Option<u64>> = (0..4).map(|p| snapshot.signature(p)).collect();
        assert!(signatures.iter().all(Option::is_some));
        assert_eq!(signatures[0], signatures[1]);
        // What the scheduler reads still tells pods apart.
        assert_ne!(signatures[0], signatures[2], "requests differ");
        assert_ne!(signatures[0], signatures[3], "node selector differs");
        // The fields set aside while hashing are back.
        assert_eq!(snapshot.pods(), &before[..]);
    }

    #[test]
    fn the_namespace_counts_when_claims_or_anti_affinity_read_it() {
        let claims =
            json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]});
        let anti = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}]}}});
        let extended = json!({"containers": [{"name": "main",
            "resources": {"requests": {"cpu": "1", "example.com/gpu": "1"}}}]});
        for extra in [claims, anti, extended] {
            let mut snapshot = snapshot(vec![
                pod("a", "team-1", "1", extra.clone()),
                pod("b", "team-2", "1", extra.clone()),
                pod("c", "team-1", "1", extra.clone()),
            ]);
            let (a, b, c) = (
                snapshot.signature(0),
                snapshot.signature(1),
                snapshot.signature(2),
            );
            assert!(a.is_some(), "{extra}");
            assert_ne!(a, b, "{extra}");
            assert_eq!(a, c, "{extra}");
        }
    }

    #[test]
    fn pods_whose_fit_can_improve_have_no_signature() {
        let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1,
            "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "x"}}}]});
        let mut snapshot = snapshot(vec![pod("a", "ns", "1", spread)]);
        assert_eq!(snapshot.signature(0), None);
    }
}
