//! Which gang APIs a cluster uses, found from its data (`simulate`) or its API
//! discovery (`run`), and the scheduler gates that use implies.
//!
//! Upstream gang scheduling (`scheduling.k8s.io` Workload/PodGroup) is behind
//! feature gates that are off by default in every release we model (alpha in
//! 1.35 and 1.36, beta but off in 1.37). Yet a cluster that serves the API, holds
//! its objects, or has pods linked to them runs it: the API server drops a pod's
//! `spec.schedulingGroup` / `spec.workloadRef` and a PodGroup's
//! `schedulingConstraints` unless the gates are on, and a scheduler without them
//! would leave the group's pods to be placed one by one while the group's
//! controller waits for all of them. Buying nodes for part of a gang is the
//! failure this project exists to prevent, so that evidence turns the gates on;
//! the operator's `--feature-gates` are applied after it and always win.
//!
//! The other gang APIs (coscheduling, Volcano, Kueue) need no gate; they are
//! listed so that the one line saying what was found is complete.

use std::collections::{BTreeMap, BTreeSet};

use dra_sim::FeatureGates;
use dra_sim::api_version::ApiGroupVersion;
use dra_sim::gates::GateError;
use dra_sim::objects::ExtraObject;
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use dra_sim::pods::KUEUE_GROUP_LABEL;

use crate::gang_kinds::GANG_KINDS;
/// The upstream group and versions, as they were first named here.
pub use crate::gang_kinds::{UPSTREAM_GROUP, UPSTREAM_VERSIONS};

/// The gates a cluster that uses the upstream gang API runs: the API and pod
/// links (`GenericWorkload`), the GangScheduling plugin (`GangScheduling`, a gate
/// of its own before 1.37) and PodGroup topology constraints
/// (`TopologyAwareWorkloadScheduling`, which only matters for a PodGroup that
/// carries one, and a stored PodGroup carries one only when the API server has
/// the gate on).
pub const UPSTREAM_GATES: &[&str] = &[
    "GenericWorkload",
    "GangScheduling",
    "TopologyAwareWorkloadScheduling",
];

/// The gang APIs found, and how much of the upstream one is in use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GangApisFound {
    /// `group/version Kind` of each gang API found (objects of it, or served),
    /// and `kueue.x-k8s.io pod-group label` for Kueue plain-pod groups.
    pub apis: BTreeSet<String>,
    /// `scheduling.k8s.io` objects of versions this release does not read.
    pub unknown: BTreeSet<String>,
    /// Pods linked to an upstream group (`spec.schedulingGroup` or, on 1.35,
    /// `spec.workloadRef`).
    pub linked_pods: usize,
}

/// What [`GangApisFound::resolve_gates`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedGates {
    /// The gates to plan with.
    pub gates: FeatureGates,
    /// Gates the evidence turned on (and the flag left on).
    pub turned_on: Vec<&'static str>,
    /// One line saying which gang APIs were found and used, if any was found.
    pub summary: Option<String>,
}

impl GangApisFound {
    /// The gang APIs `extra` (objects the loader kept, see [`GANG_KINDS`]) and
    /// `pods` show in use. `workload_refs` are 1.35 pods' `spec.workloadRef`.
    #[must_use]
    pub fn in_objects(
        extra: &[ExtraObject],
        pods: &[Pod],
        workload_refs: &BTreeMap<(String, String), Value>,
    ) -> Self {
        let mut found = Self::default();
        for obj in extra {
            found.add(&obj.api_version, &obj.kind);
        }
        let scheduling_group = |pod: &Pod| {
            pod.spec
                .as_ref()
                .and_then(|s| s.scheduling_group.as_ref())
                .and_then(|g| g.pod_group_name.as_deref())
                .is_some_and(|name| !name.is_empty())
        };
        found.linked_pods =
            pods.iter().filter(|p| scheduling_group(p)).count() + workload_refs.len();
        if pods.iter().any(|p| {
            p.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(KUEUE_GROUP_LABEL))
        }) {
            found.apis.insert(format!(
                "kueue.x-k8s.io pod groups (label {KUEUE_GROUP_LABEL})"
            ));
        }
        found
    }

    /// The gang APIs a cluster serves, as discovery lists them:
    /// `(apiVersion, kind)` of each served resource.
    #[must_use]
    pub fn served<'a>(resources: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut found = Self::default();
        for (api_version, kind) in resources {
            found.add(api_version, kind);
        }
        found
    }

    fn add(&mut self, api_version: &str, kind: &str) {
        let parsed = ApiGroupVersion::parse(api_version);
        let (group, version) = (parsed.group(), parsed.version());
        if !GANG_KINDS.iter().any(|(g, k)| *g == group && *k == kind) {
            return;
        }
        let name = format!("{api_version} {kind}");
        if group == UPSTREAM_GROUP && !UPSTREAM_VERSIONS.contains(&version) {
            self.unknown.insert(name);
        } else {
            self.apis.insert(name);
        }
    }

    /// Whether the upstream gang API is in use: objects of a version we read,
    /// or pods linked to a group.
    #[must_use]
    pub fn uses_upstream(&self) -> bool {
        self.linked_pods > 0 || self.apis.iter().any(|a| is_upstream(a))
    }

    /// The gates to plan with: `base` (a release's defaults), then the gates the
    /// evidence implies ([`UPSTREAM_GATES`]), then the operator's `flag`
    /// (`Name=bool,...`), which always wins.
    ///
    /// # Errors
    /// A malformed or unknown entry in `flag`.
    pub fn resolve_gates(
        &self,
        base: FeatureGates,
        flag: &str,
    ) -> Result<ResolvedGates, GateError> {
        let mut gates = base;
        let mut turned_on = Vec::new();
        if self.uses_upstream() {
            for &name in UPSTREAM_GATES {
                if gates.get(name) == Some(false) {
                    gates.set(name, true)?;
                    turned_on.push(name);
                }
            }
        }
        gates.apply_flag(flag)?;
        turned_on.retain(|name| gates.get(name) == Some(true));
        let summary = self.summary(&gates, &turned_on);
        Ok(ResolvedGates {
            gates,
            turned_on,
            summary,
        })
    }

    /// One line naming the gang APIs found and those used, or `None` when none
    /// was found.
    fn summary(&self, gates: &FeatureGates, turned_on: &[&str]) -> Option<String> {
        if self.apis.is_empty() && self.unknown.is_empty() && self.linked_pods == 0 {
            return None;
        }
        let upstream_on = gates.generic_workload && gates.gang_scheduling;
        let mut found: Vec<String> = self.apis.iter().cloned().collect();
        if self.linked_pods > 0 {
            found.push(format!(
                "{} pod(s) linked to {UPSTREAM_GROUP} groups",
                self.linked_pods
            ));
        }
        found.extend(
            self.unknown
                .iter()
                .map(|a| format!("{a} (a version this release does not read: ignored)")),
        );
        let used: Vec<&str> = self
            .apis
            .iter()
            .filter(|a| upstream_on || !is_upstream(a))
            .map(String::as_str)
            .collect();
        let mut line = format!("gang APIs found: {}; used: ", found.join(", "));
        if used.is_empty() {
            line.push_str("none");
        } else {
            line.push_str(&used.join(", "));
        }
        if self.uses_upstream() {
            if !upstream_on {
                line.push_str(&format!(
                    " ({UPSTREAM_GROUP} is not: --feature-gates turns GenericWorkload or GangScheduling off, so its pods are planned one by one)"
                ));
            } else if !turned_on.is_empty() {
                line.push_str(&format!(
                    " ({} turned on: a cluster using {UPSTREAM_GROUP} gangs runs them)",
                    turned_on.join(", ")
                ));
            }
        }
        Some(line)
    }
}

fn is_upstream(api: &str) -> bool {
    api.starts_with(&format!("{UPSTREAM_GROUP}/"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dra_sim::KubeVersion;

    fn gates(minor: u32) -> FeatureGates {
        FeatureGates::for_version(KubeVersion { minor })
    }

    #[test]
    fn served_upstream_api_turns_the_gang_gates_on_for_every_release() {
        for minor in 35..=37 {
            let found = GangApisFound::served([("scheduling.k8s.io/v1alpha3", "PodGroup")]);
            let resolved = found.resolve_gates(gates(minor), "").unwrap();
            assert!(resolved.gates.generic_workload, "1.{minor}");
            assert!(resolved.gates.gang_scheduling, "1.{minor}");
            assert!(
                resolved.gates.topology_aware_workload_scheduling,
                "1.{minor}"
            );
        }
        // 1.37 already runs GangScheduling under GenericWorkload: not "turned on".
        let resolved = GangApisFound::served([("scheduling.k8s.io/v1beta1", "Workload")])
            .resolve_gates(gates(37), "")
            .unwrap();
        assert_eq!(
            resolved.turned_on,
            vec!["GenericWorkload", "TopologyAwareWorkloadScheduling"]
        );
    }

    #[test]
    fn the_flag_wins_over_the_evidence() {
        let found = GangApisFound::served([("scheduling.k8s.io/v1beta1", "PodGroup")]);
        let resolved = found
            .resolve_gates(gates(37), "GenericWorkload=false")
            .unwrap();
        assert!(!resolved.gates.generic_workload);
        assert!(!resolved.turned_on.contains(&"GenericWorkload"));
        let line = resolved.summary.unwrap();
        assert!(line.contains("used: none"), "{line}");
        assert!(line.contains("planned one by one"), "{line}");
        assert!(
            found.resolve_gates(gates(37), "Bogus=true").is_err(),
            "a bad flag is still an error"
        );
    }

    #[test]
    fn no_evidence_changes_nothing_and_says_nothing() {
        let found = GangApisFound::served([("scheduling.k8s.io/v1", "PriorityClass")]);
        let resolved = found.resolve_gates(gates(37), "").unwrap();
        assert_eq!(resolved.gates, gates(37));
        assert!(resolved.turned_on.is_empty());
        assert_eq!(resolved.summary, None);
    }

    #[test]
    fn other_gang_apis_need_no_gate_but_are_listed() {
        let found = GangApisFound::served([("scheduling.x-k8s.io/v1alpha1", "PodGroup")]);
        let resolved = found.resolve_gates(gates(37), "").unwrap();
        assert!(!resolved.gates.generic_workload);
        assert_eq!(
            resolved.summary.as_deref(),
            Some(
                "gang APIs found: scheduling.x-k8s.io/v1alpha1 PodGroup; used: scheduling.x-k8s.io/v1alpha1 PodGroup"
            )
        );
    }

    #[test]
    fn unknown_upstream_versions_are_not_evidence() {
        let found = GangApisFound::served([("scheduling.k8s.io/v2", "PodGroup")]);
        assert!(!found.uses_upstream());
        let resolved = found.resolve_gates(gates(37), "").unwrap();
        assert!(!resolved.gates.generic_workload);
        assert!(resolved.summary.unwrap().contains("does not read"));
    }

    #[test]
    fn pod_links_alone_are_evidence() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "w-0", "namespace": "ml"},
            "spec": {"containers": [], "schedulingGroup": {"podGroupName": "g"}}
        }))
        .unwrap();
        let found = GangApisFound::in_objects(&[], &[pod], &BTreeMap::new());
        assert_eq!(found.linked_pods, 1);
        let resolved = found.resolve_gates(gates(36), "").unwrap();
        assert!(resolved.gates.generic_workload && resolved.gates.gang_scheduling);
        let line = resolved.summary.unwrap();
        assert!(line.contains("1 pod(s) linked"), "{line}");
        assert!(line.contains("GenericWorkload, GangScheduling"), "{line}");
    }
}
