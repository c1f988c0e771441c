//! Where a gang is tried, and the topology domains new nodes could add.
//!
//! A gang whose members must share a topology domain — a PodGroup's
//! `schedulingConstraints.topology`, or required pod affinity of every member
//! to every other member on a topology key (JobSet and LeaderWorkerSet
//! exclusive placement, hand-written co-location) — is tried whole in each
//! candidate domain: each value existing nodes have, and each value a node
//! group's new nodes would have ([`crate::groups::domain_of`]). Filling the
//! cheapest group first and then finding that the rest of the gang can only
//! follow into the same domain would otherwise make a gang that fits
//! elsewhere wait. A key whose value differs per node (the hostname) makes
//! each node its own domain: one existing node, or one new node of a group.
//!
//! Phantom nodes: PodTopologySpread counts the domains of every node that
//! passes the pod's node selection, with the pods it finds there, and the
//! minimum over them bounds the skew. Before a node is bought, the domain it
//! would add does not exist, so planning against existing nodes alone would
//! put every new node in one zone. An empty node per group with room, never
//! bound to, keeps the domain each group's new nodes would add (its zone and
//! a fresh hostname) in the spread's minimum, for single pods ([`super::pack`])
//! and gang members alike. The minimum the scheduler later sees on the real
//! nodes can only be higher, so placements planned this way stay within
//! `maxSkew` whichever planned nodes come up first.

use std::collections::BTreeSet;

use dra_api::new_node::HOSTNAME_LABEL;
use dra_sim::pods::required_pod_affinity;
use k8s_openapi::api::core::v1::Pod;

use super::Planner;
use crate::gang::Gang;
use crate::groups::{domain_of, new_node_label, template_node};

/// Where one attempt at a gang may place its members.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Domain {
    /// Anywhere: the members need not share a domain.
    Anywhere,
    /// Nodes, existing or new, with these label values (one per key).
    Labels(Vec<(String, String)>),
    /// One existing node (a key's value differs per node).
    Node(usize),
    /// One new node of a group (likewise).
    NewNode(usize),
}

impl Domain {
    /// Unrestricted.
    pub(super) fn is_anywhere(&self) -> bool {
        matches!(self, Domain::Anywhere)
    }

    /// At most one new node may be opened.
    pub(super) fn one_new_node(&self) -> bool {
        matches!(self, Domain::NewNode(_))
    }
}

/// The topology keys of a pod's required pod affinity terms.
fn affinity_keys(pod: &Pod) -> impl Iterator<Item = &str> {
    required_pod_affinity(pod)
        .iter()
        .map(|t| t.topology_key.as_str())
}

/// Whether the pod has a topology spread constraint the Filter enforces.
fn spreads_hard(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.topology_spread_constraints.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.when_unsatisfiable == "DoNotSchedule"))
}

impl Planner<'_> {
    /// The keys every pending member of `gang` must share a value of: the
    /// gang's own topology constraint, and the keys of the required pod
    /// affinity terms when every member has some and every member matches
    /// every member's terms (then, once one member is placed, the others can
    /// only follow it, key by key).
    pub(super) fn colocation_keys(&self, gang: &Gang) -> Vec<String> {
        let mut keys: BTreeSet<String> = gang.topology_key.iter().cloned().collect();
        let pods = self.snapshot.pods();
        let all_have_terms = gang.pending.len() > 1
            && gang
                .pending
                .iter()
                .all(|&p| affinity_keys(&pods[p]).next().is_some());
        if all_have_terms
            && gang
                .pending
                .iter()
                .all(|&p| self.snapshot.required_affinity_counts_all(p, &gang.pending))
        {
            for &p in &gang.pending {
                keys.extend(affinity_keys(&pods[p]).map(str::to_string));
            }
        }
        keys.into_iter().collect()
    }

    /// Whether a key's value differs from node to node (the hostname, or a
    /// key some group fills in per node).
    fn per_node_key(&self, key: &str) -> bool {
        key == HOSTNAME_LABEL
            || self
                .groups
                .iter()
                .any(|g| new_node_label(g, key, "a") != new_node_label(g, key, "b"))
    }

    /// Every domain of `keys` that existing nodes (the first `existing`) or
    /// node groups' new nodes have, in a stable order; `[Anywhere]` without
    /// keys.
    pub(super) fn domains(&self, keys: &[String], existing: usize) -> Vec<Domain> {
        if keys.is_empty() {
            return vec![Domain::Anywhere];
        }
        let per_node = keys.iter().any(|k| self.per_node_key(k));
        let mut domains = BTreeSet::new();
        for (i, node) in self.snapshot.nodes()[..existing].iter().enumerate() {
            let Some(labels) = node.metadata.labels.as_ref() else {
                continue;
            };
            let values: Option<Vec<(String, String)>> = keys
                .iter()
                .map(|k| labels.get(k).map(|v| (k.clone(), v.clone())))
                .collect();
            match values {
                Some(_) if per_node => domains.insert(Domain::Node(i)),
                Some(values) => domains.insert(Domain::Labels(values)),
                None => false,
            };
        }
        for (g, group) in self.groups.iter().enumerate() {
            if per_node {
                if keys
                    .iter()
                    .all(|k| new_node_label(group, k, "new").is_some())
                {
                    domains.insert(Domain::NewNode(g));
                }
                continue;
            }
            let values: Option<Vec<(String, String)>> = keys
                .iter()
                .map(|k| domain_of(group, k).map(|v| (k.clone(), v)))
                .collect();
            if let Some(values) = values {
                domains.insert(Domain::Labels(values));
            }
        }
        domains.into_iter().collect()
    }

    /// Whether node `node_index` is in `domain`.
    pub(super) fn node_in_domain(&self, node_index: usize, domain: &Domain) -> bool {
        match domain {
            Domain::Anywhere => true,
            Domain::Labels(values) => {
                let labels = self.snapshot.nodes()[node_index].metadata.labels.as_ref();
                values
                    .iter()
                    .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
            }
            Domain::Node(i) => *i == node_index,
            Domain::NewNode(_) => false,
        }
    }

    /// Whether new nodes of `group` are in `domain`.
    pub(super) fn group_in_domain(&self, group: usize, domain: &Domain) -> bool {
        match domain {
            Domain::Anywhere => true,
            Domain::Labels(values) => values
                .iter()
                .all(|(k, v)| domain_of(&self.groups[group], k).as_ref() == Some(v)),
            Domain::Node(_) => false,
            Domain::NewNode(g) => *g == group,
        }
    }

    /// How the reasons of an attempt in `domain` are prefixed.
    pub(super) fn domain_prefix(&self, domain: &Domain) -> String {
        match domain {
            Domain::Anywhere => String::new(),
            Domain::Labels(values) => {
                let pairs: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("{}: ", pairs.join(", "))
            }
            Domain::Node(i) => format!("{}: ", self.node_called(*i)),
            Domain::NewNode(g) => format!("one new node of {}: ", self.groups[*g].name),
        }
    }

    /// Adds an empty phantom node of `group` (see the module docs), with the
    /// DaemonSet pods it would run; returns its index. Its name holds `_`,
    /// which no Node's name (a DNS subdomain) can, so it never shadows one.
    pub(super) fn add_phantom_node(&mut self, group: usize) -> usize {
        let g = &self.groups[group];
        let (node, _) = template_node(g, &format!("{}_phantom", g.name));
        let index = self.snapshot.add_node(node, Vec::new());
        self.add_daemon_pods(index);
        index
    }

    /// Adds a phantom node for every group with room when some pending
    /// member of `gang` has a spread constraint the Filter enforces (nothing
    /// else reads an empty node); returns how many.
    pub(super) fn add_gang_phantoms(&mut self, gang: &Gang) -> usize {
        let pods = self.snapshot.pods();
        if !gang.pending.iter().any(|&p| spreads_hard(&pods[p])) {
            return 0;
        }
        let with_room: Vec<usize> = (0..self.groups.len())
            .filter(|&g| self.budget.left(g, |h| self.used[h]).is_ok_and(|n| n > 0))
            .collect();
        for &g in &with_room {
            self.add_phantom_node(g);
        }
        with_room.len()
    }
}
