//! The `PodScheduled=False` message of a pod no node takes, in kube-scheduler's words
//! (`FitError.Error()` in `pkg/scheduler/framework/types.go`): `0/N nodes are available:`
//! followed by a histogram of the node reasons, sorted as strings; or, when the pod failed
//! before any node was tried (PreFilter: a missing claim, an unusable template), that reason.

use std::collections::BTreeMap;

/// The message for a pod refused by every node of `nodes`, given the simulator's reasons:
/// per node (`node-1: Insufficient cpu; ...`), or one for the pod.
#[must_use]
pub fn fit_error(nodes: &[String], reasons: &[String]) -> String {
    let per_node: Vec<&str> = reasons
        .iter()
        .filter_map(|r| {
            let (node, why) = r.split_once(": ")?;
            nodes.iter().any(|n| n == node).then_some(why)
        })
        .collect();
    if nodes.is_empty() {
        // kube-scheduler's ErrNoNodesAvailable.
        return "no nodes available to schedule pods".into();
    }
    let nodes = nodes.len();
    if per_node.is_empty() {
        // A PreFilter failure: one reason for the pod, not one per node.
        let why = reasons.first().map_or("no reason given", String::as_str);
        return format!("0/{nodes} nodes are available: {why}.");
    }
    let mut histogram: BTreeMap<&str, usize> = BTreeMap::new();
    for reason in per_node {
        for part in reason.split("; ").filter(|p| !p.is_empty()) {
            *histogram.entry(part).or_default() += 1;
        }
    }
    let mut counted: Vec<String> = histogram
        .iter()
        .map(|(reason, count)| format!("{count} {reason}"))
        .collect();
    counted.sort();
    format!("0/{nodes} nodes are available: {}.", counted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_counted_and_sorted_as_upstream_prints_them() {
        let nodes = ["gpu-1", "gpu-2", "cpu-1"].map(String::from);
        let reasons = vec![
            "gpu-1: Insufficient cpu".to_owned(),
            "gpu-2: node(s) had untolerated taint(s); Insufficient cpu".to_owned(),
            "cpu-1: Insufficient cpu".to_owned(),
        ];
        assert_eq!(
            fit_error(&nodes, &reasons),
            "0/3 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient cpu."
        );
    }

    #[test]
    fn a_failure_before_any_node_is_tried_is_the_pods_own_reason() {
        let reasons = vec!["resourceclaim default/gpu: not found".to_owned()];
        let nodes = ["a", "b"].map(String::from);
        assert_eq!(
            fit_error(&nodes, &reasons),
            "0/2 nodes are available: resourceclaim default/gpu: not found."
        );
        assert_eq!(
            fit_error(&[], &["no nodes in the snapshot".to_owned()]),
            "no nodes available to schedule pods"
        );
    }
}
