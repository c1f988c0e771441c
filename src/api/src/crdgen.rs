//! The CustomResourceDefinition of `NodeGroup`, generated from the Rust types so the chart and
//! the code can never disagree.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::nodegroup::NodeGroup;

/// Failure to render the CRD as YAML.
#[derive(Debug, thiserror::Error)]
#[error("unable to serialize the NodeGroup CustomResourceDefinition as YAML")]
pub struct CrdGenError(#[source] serde_saphyr::SerializeError);

/// The `nodegroups.dra-autoscaler.io` CustomResourceDefinition.
#[must_use]
pub fn crd() -> CustomResourceDefinition {
    NodeGroup::crd()
}

/// The CRD as a YAML document, ready for `kubectl apply -f -` (what `dra-autoscaler crd` prints).
///
/// # Errors
/// [`CrdGenError`] if the serializer rejects the object (it should not for a well-formed CRD).
pub fn crd_yaml() -> Result<String, CrdGenError> {
    serde_saphyr::to_string(&crd()).map_err(CrdGenError)
}
