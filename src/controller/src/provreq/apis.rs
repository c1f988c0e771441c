//! Which of cluster-autoscaler's APIs the controller reads, and the objects
//! it must watch with them: ProvisioningRequests (`autoscaling.x-k8s.io/v1`)
//! name PodTemplates; CapacityBuffers (`v1beta1`) name a PodTemplate or a
//! scalable object (Deployment, ReplicaSet, StatefulSet, Job).
//!
//! Each is watched untyped, so that one object this binary cannot read never
//! fails the list: the planner reads them one by one and reports a bad one
//! on its own (`dra_plan::provreq`, `dra_plan::buffers`).

use kube::discovery::ApiResource;

/// The version of each kind read, as `(kind, version)`.
pub const READ_VERSIONS: &[(&str, &str)] = &[
    (dra_plan::provreq::KIND, "v1"),
    (dra_plan::buffers::KIND, "v1beta1"),
];

/// Whether discovery's `ar` (in API group `group`, at its most stable
/// version) is one of the kinds read, at the version read.
#[must_use]
pub fn is_read(group: &str, ar: &ApiResource) -> bool {
    group == dra_plan::provreq::API_GROUP
        && READ_VERSIONS
            .iter()
            .any(|&(kind, version)| ar.kind == kind && ar.version == version)
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// Everything to watch given the served kinds `served` (from
/// [`is_read`]): those kinds, PodTemplates when either is served, and the
/// scalable kinds when CapacityBuffers are.
#[must_use]
pub fn watched(served: &[ApiResource]) -> Vec<ApiResource> {
    if served.is_empty() {
        return Vec::new();
    }
    let mut out = served.to_vec();
    out.push(resource("", "v1", "PodTemplate", "podtemplates"));
    if served.iter().any(|ar| ar.kind == dra_plan::buffers::KIND) {
        out.push(resource("apps", "v1", "Deployment", "deployments"));
        out.push(resource("apps", "v1", "ReplicaSet", "replicasets"));
        out.push(resource("apps", "v1", "StatefulSet", "statefulsets"));
        out.push(resource("batch", "v1", "Job", "jobs"));
    }
    out
}

/// The ProvisioningRequest resource as served.
#[must_use]
pub fn provisioning_requests() -> ApiResource {
    resource(
        dra_plan::provreq::API_GROUP,
        "v1",
        dra_plan::provreq::KIND,
        "provisioningrequests",
    )
}

/// The CapacityBuffer resource as served.
#[must_use]
pub fn capacity_buffers() -> ApiResource {
    resource(
        dra_plan::provreq::API_GROUP,
        "v1beta1",
        dra_plan::buffers::KIND,
        "capacitybuffers",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_versions_read_are_watched_with_their_templates() {
        let alpha = resource(
            dra_plan::provreq::API_GROUP,
            "v1alpha1",
            "CapacityBuffer",
            "capacitybuffers",
        );
        assert!(!is_read(dra_plan::provreq::API_GROUP, &alpha));
        assert!(is_read(dra_plan::provreq::API_GROUP, &capacity_buffers()));
        assert!(is_read(
            dra_plan::provreq::API_GROUP,
            &provisioning_requests()
        ));
        assert!(!is_read("other.io", &provisioning_requests()));

        assert!(watched(&[]).is_empty());
        let kinds = |served: &[ApiResource]| -> Vec<String> {
            watched(served).into_iter().map(|ar| ar.kind).collect()
        };
        assert_eq!(
            kinds(&[provisioning_requests()]),
            ["ProvisioningRequest", "PodTemplate"]
        );
        assert_eq!(
            kinds(&[capacity_buffers()]),
            [
                "CapacityBuffer",
                "PodTemplate",
                "Deployment",
                "ReplicaSet",
                "StatefulSet",
                "Job"
            ]
        );
    }
}
