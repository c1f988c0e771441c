//! Topology domains as small integers.
//!
//! A [`TopologyColumn`] maps every node to the domain of one topology key
//! (`topology.kubernetes.io/zone=a` → domain 0, …); [`DomainCounts`] holds one
//! count per domain. The filters then answer "how many matching pods share
//! this node's zone" with two array reads instead of a label lookup and a hash.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;

use crate::selectors::Labels;

/// The domain of a node under one topology key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Domain {
    /// The node lacks the key.
    Missing,
    /// A domain the column knows.
    Known(u32),
    /// A value no node had when the column was copied: its count is zero.
    Unseen,
}

const MISSING: u32 = u32::MAX;

/// Node index → domain id for one topology key.
#[derive(Debug, Clone, Default)]
pub(crate) struct TopologyColumn {
    key: String,
    per_node: Vec<u32>,
    ids: HashMap<String, u32>,
}

impl TopologyColumn {
    pub(crate) fn new(key: &str) -> Self {
        Self {
            key: key.to_string(),
            ..Self::default()
        }
    }

    /// Appends the next node.
    pub(crate) fn push_node(&mut self, labels: Option<&Labels>) {
        let id = match labels.and_then(|l| l.get(&self.key)) {
            None => MISSING,
            Some(value) => {
                let next = u32::try_from(self.ids.len()).unwrap_or(MISSING - 1);
                *self.ids.entry(value.clone()).or_insert(next)
            }
        };
        self.per_node.push(id);
    }

    /// How many domains the column has seen.
    #[cfg(test)]
    pub(crate) fn domain_count(&self) -> usize {
        self.ids.len()
    }

    /// The domain of a node the column indexed, `None` past its end.
    pub(crate) fn indexed(&self, node_index: usize) -> Option<Domain> {
        self.per_node.get(node_index).map(|&id| {
            if id == MISSING {
                Domain::Missing
            } else {
                Domain::Known(id)
            }
        })
    }

    /// The domain of a node: from the index when the column covers it,
    /// otherwise (a node added after this copy was taken) from its labels.
    pub(crate) fn domain(&self, node_index: usize, node: &Node) -> Domain {
        if let Some(domain) = self.indexed(node_index) {
            return domain;
        }
        match node.metadata.labels.as_ref().and_then(|l| l.get(&self.key)) {
            None => Domain::Missing,
            Some(value) => self
                .ids
                .get(value)
                .map_or(Domain::Unseen, |id| Domain::Known(*id)),
        }
    }
}

/// Per-domain counts of the pods one matcher selects, over the nodes one
/// eligibility mask admits.
#[derive(Debug, Clone, Default)]
pub(crate) struct DomainCounts {
    /// Matching pods per domain.
    pods: Vec<i64>,
    /// Eligible nodes per domain: a domain exists for a spread constraint
    /// only if at least one eligible node is in it.
    nodes: Vec<u32>,
    /// Sum of `pods`, so "any pod anywhere?" costs nothing.
    total: i64,
}

impl DomainCounts {
    /// Matching pods in a domain (zero for unknown domains).
    pub(crate) fn pods_in(&self, domain: Domain) -> i64 {
        match domain {
            Domain::Known(id) => self.pods.get(id as usize).copied().unwrap_or(0),
            Domain::Missing | Domain::Unseen => 0,
        }
    }

    pub(crate) fn add_pods(&mut self, id: u32, delta: i64) {
        let index = id as usize;
        if self.pods.len() <= index {
            self.pods.resize(index + 1, 0);
        }
        self.pods[index] += delta;
        self.total += delta;
    }

    pub(crate) fn add_node(&mut self, id: u32) {
        let index = id as usize;
        if self.nodes.len() <= index {
            self.nodes.resize(index + 1, 0);
        }
        self.nodes[index] += 1;
    }

    /// Domains with at least one eligible node, and the smallest count among
    /// them (`None` when there are none).
    pub(crate) fn present_and_min(&self) -> (usize, Option<i64>) {
        let mut present = 0;
        let mut min: Option<i64> = None;
        for (index, eligible) in self.nodes.iter().enumerate() {
            if *eligible == 0 {
                continue;
            }
            present += 1;
            let count = self.pods.get(index).copied().unwrap_or(0);
            min = Some(min.map_or(count, |m| m.min(count)));
        }
        (present, min)
    }

    /// Any matching pod in any domain?
    pub(crate) fn any_pods(&self) -> bool {
        self.total > 0
    }
}

impl TopologyColumn {
    /// Forgets the last node (the inverse of [`TopologyColumn::push_node`]).
    /// Its domain id stays known; counts decide whether the domain exists.
    pub(crate) fn pop_node(&mut self) {
        self.per_node.pop();
    }
}

impl DomainCounts {
    /// The inverse of [`DomainCounts::add_node`].
    pub(crate) fn remove_node(&mut self, id: u32) {
        if let Some(slot) = self.nodes.get_mut(id as usize) {
            *slot = slot.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selectors::requirement::labels;

    #[test]
    fn nodes_share_domains_by_value() {
        let mut column = TopologyColumn::new("zone");
        column.push_node(Some(&labels(&[("zone", "a")])));
        column.push_node(Some(&labels(&[("zone", "b")])));
        column.push_node(Some(&labels(&[("zone", "a")])));
        column.push_node(None);
        assert_eq!(column.indexed(0), column.indexed(2));
        assert_ne!(column.indexed(0), column.indexed(1));
        assert_eq!(column.indexed(3), Some(Domain::Missing));
        assert_eq!(column.indexed(4), None);
        assert_eq!(column.domain_count(), 2);
    }

    #[test]
    fn min_only_over_domains_with_eligible_nodes() {
        let mut counts = DomainCounts::default();
        counts.add_node(0);
        counts.add_node(2);
        counts.add_pods(0, 3);
        counts.add_pods(1, 0);
        counts.add_pods(2, 1);
        assert_eq!(counts.present_and_min(), (2, Some(1)));
        assert_eq!(DomainCounts::default().present_and_min(), (0, None));
    }
}
