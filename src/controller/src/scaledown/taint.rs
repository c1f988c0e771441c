//! The `dra-autoscaler.io/to-be-deleted:NoSchedule` taint: put on a node before its pods are
//! evicted, so the scheduler sends nothing there meanwhile, and taken off if the removal is
//! given up. Its value is the Unix time it was put on. It is also how a restarted controller
//! finds the removals it had started.

use dra_plan::scaledown::keys::TO_BE_DELETED_TAINT;
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};

/// How many times a taint write is retried after losing a race with another writer.
const CONFLICT_RETRIES: usize = 5;

/// Whether the node carries our taint.
#[must_use]
pub fn is_tainted(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TO_BE_DELETED_TAINT))
}

/// The taints of `node` with ours added (`Some(now)`) or removed (`None`); `None` when
/// nothing changes.
fn with_taint(node: &Node, now: Option<Timestamp>) -> Option<Vec<Taint>> {
    let mut taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let present = taints.iter().any(|t| t.key == TO_BE_DELETED_TAINT);
    match now {
        Some(_) if present => None,
        Some(now) => {
            taints.push(Taint {
                key: TO_BE_DELETED_TAINT.to_string(),
                value: Some(now.as_second().to_string()),
                effect: "NoSchedule".to_string(),
                time_added: None,
            });
            Some(taints)
        }
        None if !present => None,
        None => {
            taints.retain(|t| t.key != TO_BE_DELETED_TAINT);
            Some(taints)
        }
    }
}

/// Puts our taint on node `name` (`Some(now)`) or takes it off (`None`). The write is a merge
/// patch carrying the resourceVersion read, so a concurrent change to the node's taints is
/// never lost: on a conflict the node is read again. A node that is gone needs no taint.
///
/// # Errors
/// The API server refused, or kept answering with conflicts.
pub async fn set(
    client: &kube::Client,
    name: &str,
    now: Option<Timestamp>,
) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut last = None;
    for _ in 0..CONFLICT_RETRIES {
        let Some(node) = nodes.get_opt(name).await? else {
            return Ok(());
        };
        let Some(taints) = with_taint(&node, now) else {
            return Ok(());
        };
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": node.metadata.resource_version},
            "spec": {"taints": taints},
        });
        match nodes
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                last = Some(kube::Error::Api(status));
            }
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        kube::Error::Service(format!("taint of node {name} kept conflicting").into())
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn node(taints: serde_json::Value) -> Node {
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": "n"}, "spec": {"taints": taints}}),
        )
        .unwrap()
    }

    #[test]
    fn the_taint_is_added_once_and_removed_leaving_others() {
        let now: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let other = serde_json::json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}]);
        let added = with_taint(&node(other.clone()), Some(now)).unwrap();
        assert_eq!(added.len(), 2);
        assert_eq!(added[1].key, TO_BE_DELETED_TAINT);
        assert_eq!(added[1].value.as_deref(), Some("1796083200"));
        let tainted = node(serde_json::to_value(&added).unwrap());
        assert!(is_tainted(&tainted));
        assert_eq!(with_taint(&tainted, Some(now)), None, "already there");
        let removed = with_taint(&tainted, None).unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].key, "gpu");
        assert_eq!(with_taint(&node(other), None), None, "nothing to remove");
    }
}
