//! NodeName: a pod that names a node (`spec.nodeName`) fits only there.

use k8s_openapi::api::core::v1::Node;

/// Upstream plugin name.
pub const NAME: &str = "NodeName";
/// Upstream's `ErrReason`.
pub const REASON: &str = "node(s) didn't match the requested node name";

/// Does the node carry the requested name (or is none requested)?
pub(crate) fn passes(requested: Option<&str>, node: &Node) -> bool {
    match requested {
        None | Some("") => true,
        Some(name) => node.metadata.name.as_deref() == Some(name),
    }
}
