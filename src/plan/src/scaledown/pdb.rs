//! PodDisruptionBudgets as the Eviction API applies them, and the budget left as one pass
//! removes several nodes (cluster-autoscaler's `RemainingPdbTracker`).
//!
//! A pod that is not running (`Pending`, finished or being deleted) is evicted without looking at
//! budgets; a pod under more than one budget cannot be evicted at all; an unready pod does not
//! spend its budget when the budget says `unhealthyPodEvictionPolicy: AlwaysAllow`, or (the
//! default) when the budget has its desired healthy pods. Otherwise every budget selecting the
//! pod must have a disruption left, and moving the pod spends one.

use std::collections::BTreeMap;

use dra_sim::objects::ExtraObject;
use dra_sim::selectors::Selector;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

/// One budget, read.
#[derive(Debug, Clone)]
struct Budget {
    /// `namespace/name`.
    key: String,
    namespace: String,
    selector: Selector,
    /// Disruptions left in this pass.
    left: i64,
    /// `status.observedGeneration >= metadata.generation`.
    processed: bool,
    always_allow_unhealthy: bool,
    healthy_enough: bool,
}

/// A budget that cannot be read, and why; it is left out (its pods move as if it were not
/// there, as the API server skips a budget whose selector does not parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadBudget {
    /// `namespace/name`.
    pub budget: String,
    /// What was wrong.
    pub error: String,
}

/// Why a PodDisruptionBudget keeps a pod from being evicted (the Eviction API's refusals,
/// as the simulation spends budgets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// More than one budget selects the pod.
    #[error(
        "pod {pod} is selected by more than one PodDisruptionBudget ({}); the Eviction API refuses to evict it",
        budgets.join(", ")
    )]
    MultipleBudgets {
        /// `namespace/name` of the pod.
        pod: String,
        /// `namespace/name` of each budget.
        budgets: Vec<String>,
    },
    /// The budget's `status.observedGeneration` is behind its `metadata.generation`.
    #[error("PodDisruptionBudget {budget} is still being processed (pod {pod})")]
    NotProcessed {
        /// `namespace/name` of the budget.
        budget: String,
        /// `namespace/name` of the pod.
        pod: String,
    },
    /// The budget's `status.disruptionsAllowed`, less what the pass spent, is 0.
    #[error("PodDisruptionBudget {budget} allows no more disruptions (pod {pod})")]
    NoDisruptionsLeft {
        /// `namespace/name` of the budget.
        budget: String,
        /// `namespace/name` of the pod.
        pod: String,
    },
}

impl BudgetError {
    /// Reads the words `Display` writes.
    #[must_use]
    pub fn parse(words: &str) -> Option<Self> {
        if let Some(rest) = words.strip_prefix("pod ")
            && let Some(rest) = rest.strip_suffix("); the Eviction API refuses to evict it")
            && let Some((pod, budgets)) =
                rest.split_once(" is selected by more than one PodDisruptionBudget (")
        {
            return Some(Self::MultipleBudgets {
                pod: pod.into(),
                budgets: budgets.split(", ").map(String::from).collect(),
            });
        }
        let rest = words.strip_prefix("PodDisruptionBudget ")?;
        let (rest, pod) = rest.strip_suffix(')')?.rsplit_once(" (pod ")?;
        if let Some(budget) = rest.strip_suffix(" is still being processed") {
            return Some(Self::NotProcessed {
                budget: budget.into(),
                pod: pod.into(),
            });
        }
        let budget = rest.strip_suffix(" allows no more disruptions")?;
        Some(Self::NoDisruptionsLeft {
            budget: budget.into(),
            pod: pod.into(),
        })
    }
}

/// Every budget, with what is left of it.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    budgets: Vec<Budget>,
}

/// The kinds callers ask the loader to keep for [`Budgets::read`].
pub const PDB_KIND: (&str, &str) = ("policy", "PodDisruptionBudget");

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether the Eviction API deletes the pod without looking at budgets (`canIgnorePDB`).
fn ignores_budgets(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Pending" | "Succeeded" | "Failed"))
        || pod.metadata.deletion_timestamp.is_some()
}

fn namespace_of(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

impl Budgets {
    /// Reads the `policy/v1` PodDisruptionBudgets among `extra`.
    #[must_use]
    pub fn read(extra: &[ExtraObject]) -> (Self, Vec<BadBudget>) {
        let mut budgets = Vec::new();
        let mut bad = Vec::new();
        for object in extra
            .iter()
            .filter(|o| o.kind == PDB_KIND.1 && o.api_version == "policy/v1")
        {
            let pdb: PodDisruptionBudget = match serde_json::from_value(object.value.clone()) {
                Ok(pdb) => pdb,
                Err(e) => {
                    bad.push(BadBudget {
                        budget: object.origin.to_string(),
                        error: e.to_string(),
                    });
                    continue;
                }
            };
            let namespace = pdb
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            let key = format!(
                "{namespace}/{}",
                pdb.metadata.name.as_deref().unwrap_or_default()
            );
            let spec = pdb.spec.unwrap_or_default();
            let selector = match Selector::compile(spec.selector.as_ref()) {
                Ok(s) => s,
                Err(e) => {
                    bad.push(BadBudget {
                        budget: key,
                        error: format!("spec.selector: {e}"),
                    });
                    continue;
                }
            };
            let status = pdb.status.unwrap_or_default();
            let generation = pdb.metadata.generation.unwrap_or(0);
            budgets.push(Budget {
                key,
                namespace,
                selector,
                left: i64::from(status.disruptions_allowed.unwrap_or(0)),
                processed: status.observed_generation.unwrap_or(0) >= generation,
                always_allow_unhealthy: spec.unhealthy_pod_eviction_policy.as_deref()
                    == Some("AlwaysAllow"),
                healthy_enough: {
                    let (current, desired) = (
                        status.current_healthy.unwrap_or(0),
                        status.desired_healthy.unwrap_or(0),
                    );
                    current >= desired && desired > 0
                },
            });
        }
        (Self { budgets }, bad)
    }

    fn matching(&self, pod: &Pod) -> Vec<usize> {
        let namespace = namespace_of(pod);
        self.budgets
            .iter()
            .enumerate()
            .filter(|(_, b)| {
                b.namespace == namespace && b.selector.matches(pod.metadata.labels.as_ref())
            })
            .map(|(i, _)| i)
            .collect()
    }

    /// Whether any budget selects the pod (a kube-system pod with one may move).
    #[must_use]
    pub fn covers(&self, pod: &Pod) -> bool {
        !self.matching(pod).is_empty()
    }

    /// What evicting all of `pods` would spend, or why it cannot be done. The budgets are not
    /// changed; [`Budgets::spend`] commits the returned spending.
    ///
    /// # Errors
    /// The first pod a budget blocks, naming the budget.
    pub fn try_spend<'a>(
        &self,
        pods: impl IntoIterator<Item = &'a Pod>,
    ) -> Result<Spending, BudgetError> {
        let mut spent: BTreeMap<usize, i64> = BTreeMap::new();
        for pod in pods {
            if ignores_budgets(pod) {
                continue;
            }
            let matching = self.matching(pod);
            let name = format!(
                "{}/{}",
                namespace_of(pod),
                pod.metadata.name.as_deref().unwrap_or_default()
            );
            if matching.len() > 1 {
                return Err(BudgetError::MultipleBudgets {
                    pod: name,
                    budgets: matching
                        .iter()
                        .map(|&i| self.budgets[i].key.clone())
                        .collect(),
                });
            }
            let Some(&index) = matching.first() else {
                continue;
            };
            let budget = &self.budgets[index];
            if !is_ready(pod) && (budget.always_allow_unhealthy || budget.healthy_enough) {
                continue;
            }
            if !budget.processed {
                return Err(BudgetError::NotProcessed {
                    budget: budget.key.clone(),
                    pod: name,
                });
            }
            let used = spent.entry(index).or_default();
            if budget.left - *used < 1 {
                return Err(BudgetError::NoDisruptionsLeft {
                    budget: budget.key.clone(),
                    pod: name,
                });
            }
            *used += 1;
        }
        Ok(Spending(spent))
    }

    /// Commits what [`Budgets::try_spend`] computed.
    pub fn spend(&mut self, spending: &Spending) {
        for (&index, &n) in &spending.0 {
            if let Some(budget) = self.budgets.get_mut(index) {
                budget.left -= n;
            }
        }
    }
}

/// Disruptions to take from budgets, by budget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spending(BTreeMap<usize, i64>);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::scaledown::reasons::BlockingPodReason;
    use dra_sim::objects::Origin;

    fn pdb(name: &str, app: &str, allowed: i32, observed: i64) -> ExtraObject {
        ExtraObject {
            api_version: "policy/v1".into(),
            kind: "PodDisruptionBudget".into(),
            origin: Origin::default(),
            value: serde_json::json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": "ml", "generation": 1},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
                "status": {"disruptionsAllowed": allowed, "observedGeneration": observed,
                           "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
            }),
        }
    }

    fn pod(name: &str, app: &str, phase: &str, ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ml", "labels": {"app": app}},
            "spec": {"containers": []},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_budget_is_spent_across_nodes_of_one_pass() {
        let (mut budgets, bad) = Budgets::read(&[pdb("web", "web", 1, 1)]);
        assert!(bad.is_empty());
        let a = pod("web-0", "web", "Running", true);
        let b = pod("web-1", "web", "Running", true);
        let spending = budgets.try_spend([&a]).unwrap();
        assert!(
            budgets.try_spend([&a, &b]).is_err(),
            "two pods of one budget with one disruption left"
        );
        budgets.spend(&spending);
        let err = budgets.try_spend([&b]).unwrap_err();
        assert_eq!(
            err,
            BudgetError::NoDisruptionsLeft {
                budget: "ml/web".into(),
                pod: "ml/web-1".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "PodDisruptionBudget ml/web allows no more disruptions (pod ml/web-1)"
        );
        assert_eq!(err.code(), BlockingPodReason::NotEnoughPdb);
        assert_eq!(BudgetError::parse(&err.to_string()), Some(err));
    }

    #[test]
    fn pods_that_are_not_running_or_unready_with_a_healthy_budget_spend_nothing() {
        let (budgets, _) = Budgets::read(&[pdb("web", "web", 0, 1)]);
        let pending = pod("web-0", "web", "Pending", false);
        let unready = pod("web-1", "web", "Running", false);
        let ready = pod("web-2", "web", "Running", true);
        assert!(budgets.try_spend([&pending, &unready]).is_ok());
        assert!(budgets.try_spend([&ready]).is_err());
    }

    #[test]
    fn two_budgets_or_an_unprocessed_one_block() {
        let (budgets, _) = Budgets::read(&[pdb("a", "web", 1, 1), pdb("b", "web", 1, 1)]);
        let err = budgets
            .try_spend([&pod("web-0", "web", "Running", true)])
            .unwrap_err();
        assert_eq!(
            err,
            BudgetError::MultipleBudgets {
                pod: "ml/web-0".into(),
                budgets: vec!["ml/a".into(), "ml/b".into()]
            }
        );
        assert!(
            err.to_string()
                .contains("more than one PodDisruptionBudget (ml/a, ml/b)"),
            "{err}"
        );
        assert_eq!(BudgetError::parse(&err.to_string()), Some(err));
        let (budgets, _) = Budgets::read(&[pdb("a", "web", 1, 0)]);
        let err = budgets
            .try_spend([&pod("web-0", "web", "Running", true)])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "PodDisruptionBudget ml/a is still being processed (pod ml/web-0)"
        );
        assert_eq!(BudgetError::parse(&err.to_string()), Some(err));
        assert!(budgets.covers(&pod("web-0", "web", "Running", true)));
        assert!(!budgets.covers(&pod("db-0", "db", "Running", true)));
    }
}
