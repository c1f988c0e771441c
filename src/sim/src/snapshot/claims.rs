//! A pod's claims, resolved as the DynamicResources plugin's PreFilter
//! resolves them, and the claims the ResourceClaim controller would already
//! have made from templates (instantiated here under stable names).

use crate::reason::{Code, Reason};
use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{ObjectKey, PodClaims, Snapshot, object_key};
use crate::objects::ObjectRef;

/// Annotation the ResourceClaim controller puts on generated claims, naming
/// the pod's claim entry they were made for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// Suffix of the claim the scheduler creates for extended resources served
/// by DRA (KEP-5004). Upstream uses generateName; a simulation needs a stable
/// name.
pub const EXTENDED_RESOURCES_SUFFIX: &str = "extended-resources";

/// The key of a pod's extended-resource claim.
#[must_use]
pub fn extended_claim_key(pod: &ObjectKey) -> ObjectKey {
    ObjectRef::new(
        pod.namespace.clone(),
        format!("{}-{EXTENDED_RESOURCES_SUFFIX}", pod.name),
    )
}

impl Snapshot {
    /// Resolves the claims of a pod as the DynamicResources plugin's PreFilter
    /// does, instantiating claims from templates that the ResourceClaim
    /// controller would already have created.
    ///
    /// # Errors
    /// An operator-readable reason the pod cannot be scheduled anywhere (a
    /// missing claim or template, a claim owned by another pod).
    pub fn resolve_claims(&mut self, pod_index: usize) -> Result<PodClaims, Reason> {
        let pod = &self.pods[pod_index];
        let pod_key = object_key(&pod.metadata);
        let pod_uid = pod.metadata.uid.clone();
        let namespace = pod_key.namespace.clone();
        let entries = pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.clone())
            .unwrap_or_default();
        let statuses: BTreeMap<String, Option<String>> = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|s| (s.name.clone(), s.resource_claim_name.clone()))
            .collect();
        let mut resolved = PodClaims::default();
        for entry in entries {
            let key = if let Some(name) = &entry.resource_claim_name {
                ObjectRef::new(namespace.clone(), name.clone())
            } else if let Some(template_name) = &entry.resource_claim_template_name {
                match statuses.get(&entry.name) {
                    // A recorded nil name means "no claim needed".
                    Some(None) => continue,
                    Some(Some(name)) => ObjectRef::new(namespace.clone(), name.clone()),
                    None => match self.generated_claim(&pod_key, pod_uid.as_deref(), &entry.name) {
                        Some(key) => key,
                        None => self.instantiate_claim(
                            &pod_key,
                            pod_uid.as_deref(),
                            &entry.name,
                            template_name,
                        )?,
                    },
                }
            } else {
                // Neither source: nothing to resolve, as upstream skips it.
                continue;
            };
            let claim = self.claims.get(&key).ok_or_else(|| {
                Reason::new(
                    Code::ClaimNotFound,
                    format!(
                        "resourceclaim {} (pod claim {:?}) not found",
                        key, entry.name
                    ),
                )
            })?;
            if claim.metadata.deletion_timestamp.is_some() {
                return Err(Reason::new(
                    Code::ClaimBeingDeleted,
                    format!("resourceclaim {} is being deleted", key),
                ));
            }
            let allocated = claim
                .status
                .as_ref()
                .is_some_and(|s| s.allocation.is_some());
            if resolved.allocated.contains(&key) || resolved.to_allocate.contains(&key) {
                continue;
            }
            if allocated {
                resolved.allocated.push(key);
            } else {
                self.check_device_classes(claim)?;
                resolved.to_allocate.push(key);
            }
        }
        Ok(resolved)
    }

    /// PreFilter's check of a claim to allocate, request by request, before
    /// any allocator runs (the DynamicResources plugin's PreFilter): every
    /// request's (and `firstAvailable` subrequest's) DeviceClass exists
    /// (`validateDeviceClass`), `firstAvailable` needs DRAPrioritizedList,
    /// and a request is one of the two kinds. Upstream marks the pod
    /// unschedulable for each, not an error. An empty class name (an
    /// unsupported request type) is left to the allocator, which fails the
    /// pod with an error as upstream's PreFilter does.
    fn check_device_classes(&self, claim: &ResourceClaim) -> Result<(), Reason> {
        let exists = |class: &str| {
            class.is_empty()
                || self
                    .device_classes
                    .iter()
                    .any(|c| c.metadata.name.as_deref() == Some(class))
        };
        let requests = claim
            .spec
            .as_ref()
            .and_then(|s| s.devices.as_ref())
            .and_then(|d| d.requests.as_ref());
        let claim_key = || object_key(&claim.metadata);
        for request in requests.into_iter().flatten() {
            let classes: Vec<(String, &str)> = match (&request.exactly, &request.first_available) {
                (Some(exactly), _) => vec![(request.name.clone(), &exactly.device_class_name)],
                (None, Some(subs)) if !subs.is_empty() => {
                    if !self.gates.prioritized_list {
                        return Err(Reason::new(
                            Code::PrioritizedListDisabled,
                            format!(
                                "resource claim {}, request {}: has subrequests, but the DRAPrioritizedList feature is disabled",
                                claim_key(),
                                request.name
                            ),
                        ));
                    }
                    subs.iter()
                        .map(|sub| {
                            (
                                format!("{}/{}", request.name, sub.name),
                                sub.device_class_name.as_str(),
                            )
                        })
                        .collect()
                }
                _ => {
                    return Err(Reason::new(
                        Code::UnknownRequestType,
                        format!(
                            "resource claim {}, request {}: unknown request type",
                            claim_key(),
                            request.name
                        ),
                    ));
                }
            };
            if let Some((name, class)) = classes.into_iter().find(|(_, class)| !exists(class)) {
                return Err(Reason::new(
                    Code::DeviceClassNotFound,
                    format!("request {name}: device class {class} does not exist"),
                ));
            }
        }
        Ok(())
    }

    /// An existing claim generated for this pod entry: owned by the pod (by
    /// uid when the pod has one) and annotated with the entry's name.
    pub(super) fn generated_claim(
        &self,
        pod: &ObjectKey,
        pod_uid: Option<&str>,
        entry: &str,
    ) -> Option<ObjectKey> {
        let owner =
            pod_uid.map_or_else(|| format!("name:{}", pod.name), |uid| format!("uid:{uid}"));
        self.generated
            .get(&(pod.namespace.clone(), owner, entry.to_string()))
            .cloned()
    }

    /// Indexes a claim the ResourceClaim controller generated for a pod's
    /// claim entry, by (namespace, owner, entry), under the owner's uid and
    /// under its name (a pod read without a uid is matched by name).
    pub(super) fn index_generated(&mut self, key: &ObjectKey) {
        let Some(claim) = self.claims.get(key) else {
            return;
        };
        let Some(entry) = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION))
        else {
            return;
        };
        let owners: Vec<String> = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|o| o.kind == "Pod" && o.controller == Some(true))
            .flat_map(|o| [format!("uid:{}", o.uid), format!("name:{}", o.name)])
            .collect();
        for owner in owners {
            self.generated
                .entry((key.namespace.clone(), owner, entry.clone()))
                .or_insert_with(|| key.clone());
        }
    }

    fn instantiate_claim(
        &mut self,
        pod: &ObjectKey,
        pod_uid: Option<&str>,
        entry: &str,
        template_name: &str,
    ) -> Result<ObjectKey, Reason> {
        let template_key = ObjectRef::new(pod.namespace.clone(), template_name);
        let template = self.templates.get(&template_key).ok_or_else(|| {
            Reason::new(
                Code::ClaimTemplateNotFound,
                format!(
                    "resourceclaimtemplate {} (pod claim {entry:?}) not found",
                    template_key
                ),
            )
        })?;
        // The controller uses generateName with a random suffix; a simulation
        // needs a stable name, so the suffix is left out.
        let key = ObjectRef::new(pod.namespace.clone(), format!("{}-{entry}", pod.name));
        let template_spec = template.spec.clone().unwrap_or_default();
        let mut annotations = template_spec
            .metadata
            .as_ref()
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default();
        annotations.insert(POD_CLAIM_NAME_ANNOTATION.into(), entry.to_string());
        let claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some(key.name.clone()),
                namespace: Some(key.namespace.clone()),
                labels: template_spec
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.clone()),
                annotations: Some(annotations),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: pod.name.clone(),
                    uid: pod_uid.unwrap_or_default().to_string(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..Default::default()
            },
            spec: template_spec.spec,
            status: None,
        };
        self.claims.insert(key.clone(), claim);
        self.index_generated(&key);
        Ok(key)
    }
}
