//! The ResourceClaim controller's share of the work: a pod's claims from templates are created
//! (as `kube-controller-manager`'s resourceclaim controller does) and recorded in the pod's
//! `status.resourceClaimStatuses`, so the scheduler finds real claims to allocate; and claims
//! are released when their pods go ([`releases`]), as that controller and the garbage collector
//! release them, so a deleted GPU job's nodes become empty and can be scaled down.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimConsumerReference, ResourceClaimTemplate,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// The annotation upstream puts on a generated claim: the pod claim it is for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = dra_sim::snapshot::POD_CLAIM_NAME_ANNOTATION;

/// A claim a pod needs and does not have yet.
#[derive(Debug, Clone, PartialEq)]
pub enum Needed {
    /// Create this claim (with `generateName`), then record its name.
    Create {
        /// The pod's claim entry name.
        pod_claim: String,
        /// The claim to create.
        claim: Box<ResourceClaim>,
    },
    /// A claim generated earlier for this pod claim exists: record its name.
    Record {
        /// The pod's claim entry name.
        pod_claim: String,
        /// The existing claim's name.
        name: String,
    },
    /// The template does not exist (the pod waits, as upstream's).
    MissingTemplate {
        /// The pod's claim entry name.
        pod_claim: String,
        /// The template's name.
        template: String,
    },
}

fn owner(pod: &Pod) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// What `pod` still needs, given the templates and claims of its namespace.
#[must_use]
pub fn needed(
    pod: &Pod,
    templates: &BTreeMap<String, &ResourceClaimTemplate>,
    claims: &[&ResourceClaim],
) -> Vec<Needed> {
    let recorded: Vec<String> = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|s| s.name.clone())
        .collect();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let mut out = Vec::new();
    for entry in pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .into_iter()
        .flatten()
    {
        let Some(template_name) = &entry.resource_claim_template_name else {
            continue;
        };
        if recorded.contains(&entry.name) {
            continue;
        }
        let existing = claims.iter().find(|c| {
            c.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.uid == uid && o.controller == Some(true))
                && c.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION))
                    == Some(&entry.name)
        });
        if let Some(claim) = existing {
            out.push(Needed::Record {
                pod_claim: entry.name.clone(),
                name: claim.metadata.name.clone().unwrap_or_default(),
            });
            continue;
        }
        let Some(template) = templates.get(template_name) else {
            out.push(Needed::MissingTemplate {
                pod_claim: entry.name.clone(),
                template: template_name.clone(),
            });
            continue;
        };
        let template_spec = template.spec.clone().unwrap_or_default();
        let template_meta = template_spec.metadata.unwrap_or_default();
        let mut annotations = template_meta.annotations.unwrap_or_default();
        annotations.insert(POD_CLAIM_NAME_ANNOTATION.into(), entry.name.clone());
        let claim = ResourceClaim {
            metadata: ObjectMeta {
                generate_name: Some(format!("{pod_name}-{}-", entry.name)),
                namespace: pod.metadata.namespace.clone(),
                labels: template_meta.labels,
                annotations: Some(annotations),
                owner_references: Some(vec![owner(pod)]),
                ..ObjectMeta::default()
            },
            spec: template_spec.spec,
            status: None,
        };
        out.push(Needed::Create {
            pod_claim: entry.name.clone(),
            claim: Box::new(claim),
        });
    }
    out
}

/// What to do with a claim whose consumers are gone.
#[derive(Debug, Clone, PartialEq)]
pub enum Release {
    /// A claim generated for a pod that is gone (the garbage collector deletes the dependents
    /// of a deleted owner) or done (the resourceclaim controller deletes it): delete it.
    Delete {
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
    },
    /// Some pods it was reserved for are gone or done: keep the others; with none left, the
    /// allocation is cleared too (a structured allocation is released by clearing it).
    Unreserve {
        /// The claim's namespace.
        namespace: String,
        /// The claim's name.
        name: String,
        /// The reservations left.
        reserved_for: Vec<ResourceClaimConsumerReference>,
        /// Clear `status.allocation`.
        deallocate: bool,
    },
}

/// Whether the pod will never run again: finished, or being deleted before it was scheduled
/// (upstream's `isPodDone`).
fn is_done(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) || (pod.metadata.deletion_timestamp.is_some()
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(str::is_empty))
}

/// The claims to release given every pod of the cluster, as kube-controller-manager does:
/// the resourceclaim controller drops reservations of pods that are gone or done (clearing
/// the allocation once none is left) and deletes a claim generated for a pod (its controller
/// owner) once it is reserved for nothing and that pod is done or replaced by another of the
/// same name; the garbage collector deletes a claim whose owning pod is gone.
#[must_use]
pub fn releases(claims: &[ResourceClaim], pods: &[Pod]) -> Vec<Release> {
    let by_uid: BTreeMap<&str, &Pod> = pods
        .iter()
        .filter_map(|p| Some((p.metadata.uid.as_deref()?, p)))
        .collect();
    let live = |uid: &str| by_uid.get(uid).is_some_and(|p| !is_done(p));
    let mut out = Vec::new();
    for claim in claims {
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let reserved: &[ResourceClaimConsumerReference] = claim
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.as_deref())
            .unwrap_or_default();
        let valid: Vec<ResourceClaimConsumerReference> = reserved
            .iter()
            .filter(|r| r.resource != "pods" || live(&r.uid))
            .cloned()
            .collect();
        let owner = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true) && o.api_version == "v1" && o.kind == "Pod");
        if valid.is_empty()
            && let Some(owner) = owner
            && !live(&owner.uid)
        {
            out.push(Release::Delete { namespace, name });
        } else if valid.len() < reserved.len() {
            let allocated = claim
                .status
                .as_ref()
                .is_some_and(|s| s.allocation.is_some());
            out.push(Release::Unreserve {
                namespace,
                name,
                deallocate: valid.is_empty() && allocated,
                reserved_for: valid,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "train-0", "namespace": "ml", "uid": "u-0"},
            "spec": {"containers": [], "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                {"name": "shared", "resourceClaimName": "pool"},
                {"name": "nic", "resourceClaimTemplateName": "missing"}]},
        }))
        .expect("pod")
    }

    fn template() -> ResourceClaimTemplate {
        serde_json::from_value(json!({
            "metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {"metadata": {"labels": {"team": "a"}},
                     "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}}
        }))
        .expect("template")
    }

    #[test]
    fn claims_are_created_from_templates_owned_by_the_pod() {
        let template = template();
        let templates = BTreeMap::from([("one-gpu".to_owned(), &template)]);
        let needed = needed(&pod(), &templates, &[]);
        assert_eq!(needed.len(), 2);
        let Needed::Create { pod_claim, claim } = &needed[0] else {
            panic!("expected a claim to create, got {needed:?}");
        };
        assert_eq!(pod_claim, "gpu");
        assert_eq!(
            claim.metadata.generate_name.as_deref(),
            Some("train-0-gpu-")
        );
        assert_eq!(claim.metadata.namespace.as_deref(), Some("ml"));
        let owner = &claim.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Pod", "u-0", Some(true))
        );
        assert_eq!(
            claim.metadata.annotations.as_ref().expect("annotations")[POD_CLAIM_NAME_ANNOTATION],
            "gpu"
        );
        assert_eq!(claim.metadata.labels.as_ref().expect("labels")["team"], "a");
        assert_eq!(claim.spec, template.spec.and_then(|s| s.spec));
        assert_eq!(
            needed[1],
            Needed::MissingTemplate {
                pod_claim: "nic".into(),
                template: "missing".into()
            }
        );
    }

    #[test]
    fn a_claim_created_before_a_restart_is_recorded_not_created_again() {
        let template = template();
        let templates = BTreeMap::from([("one-gpu".to_owned(), &template)]);
        let existing: ResourceClaim = serde_json::from_value(json!({
            "metadata": {"name": "train-0-gpu-x7k2p", "namespace": "ml",
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "train-0", "uid": "u-0", "controller": true}]},
            "spec": {}
        }))
        .expect("claim");
        let needed = needed(&pod(), &templates, &[&existing]);
        assert_eq!(
            needed[0],
            Needed::Record {
                pod_claim: "gpu".into(),
                name: "train-0-gpu-x7k2p".into()
            }
        );
    }

    fn claim(name: &str, owner: Option<&str>, reserved_for: &[&str]) -> ResourceClaim {
        let owners: Vec<serde_json::Value> = owner
            .map(|uid| json!({"apiVersion": "v1", "kind": "Pod", "name": "train-0", "uid": uid, "controller": true}))
            .into_iter()
            .collect();
        let reserved: Vec<serde_json::Value> = reserved_for
            .iter()
            .map(|uid| json!({"resource": "pods", "name": "train-0", "uid": uid}))
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "ownerReferences": owners},
            "spec": {},
            "status": {"allocation": {"devices": {"results": []}}, "reservedFor": reserved}
        }))
        .expect("claim")
    }

    #[test]
    fn claims_are_released_when_their_pods_go_as_kube_controller_manager_releases_them() {
        let running = pod();
        let mut done = pod();
        done.metadata.uid = Some("u-done".into());
        done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
        let pods = [running, done];
        let claims = [
            // Generated for a pod that is gone: the garbage collector deletes it.
            claim("gone-gpu-1", Some("u-gone"), &["u-gone"]),
            // Generated for a pod that finished: the resourceclaim controller deletes it.
            claim("done-gpu-1", Some("u-done"), &["u-done"]),
            // Generated for a running pod: kept.
            claim("train-0-gpu-1", Some("u-0"), &["u-0"]),
            // Shared by name, one consumer gone: unreserved, still allocated for the other.
            claim("pool", None, &["u-0", "u-gone"]),
            // Shared by name, its only consumer gone: unreserved and deallocated, kept.
            claim("spare", None, &["u-gone"]),
        ];
        assert_eq!(
            releases(&claims, &pods),
            vec![
                Release::Delete {
                    namespace: "ml".into(),
                    name: "gone-gpu-1".into()
                },
                Release::Delete {
                    namespace: "ml".into(),
                    name: "done-gpu-1".into()
                },
                Release::Unreserve {
                    namespace: "ml".into(),
                    name: "pool".into(),
                    reserved_for: vec![
                        serde_json::from_value(
                            json!({"resource": "pods", "name": "train-0", "uid": "u-0"})
                        )
                        .expect("ref")
                    ],
                    deallocate: false,
                },
                Release::Unreserve {
                    namespace: "ml".into(),
                    name: "spare".into(),
                    reserved_for: Vec::new(),
                    deallocate: true,
                },
            ]
        );
    }
}
