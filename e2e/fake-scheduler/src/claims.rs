//! The ResourceClaim controller's share of the work: a pod's claims from templates are created
//! (as `kube-controller-manager`'s resourceclaim controller does) and recorded in the pod's
//! `status.resourceClaimStatuses`, so the scheduler finds real claims to allocate.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
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
}
