//! An in-memory provider: records every call, honours the atomic contract and
//! request-id idempotency, and fails on demand. For tests and `--dry-run`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use futures::future::BoxFuture;

use super::{
    ErrorCategory, GroupRef, IncreaseRequest, Increased, NodeToDelete, ScaleError, ScaleExecutor,
};

/// A call the provider received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// An increase (plain or atomic).
    Increase(IncreaseRequest),
    /// Machines given up on.
    DeleteUnregistered {
        /// The group.
        group: GroupRef,
        /// The names passed.
        names: Vec<String>,
    },
    /// Machines deleted by name or instance id (scale-down, machines that never registered,
    /// a gang's machines given back).
    DeleteNodes {
        /// The group.
        group: GroupRef,
        /// The node names passed.
        nodes: Vec<String>,
        /// The provider ids passed.
        provider_ids: Vec<String>,
    },
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<Call>,
    failures: VecDeque<(ErrorCategory, String)>,
    /// Machines each provider group can still start; absent means unlimited.
    capacity: BTreeMap<String, usize>,
    /// Answers already given, by request id.
    answered: BTreeMap<String, Increased>,
    next_id: usize,
    no_atomic: bool,
    /// Increases still to be applied with their answer lost.
    lose_answers: usize,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct InMemoryProvider {
    state: Mutex<State>,
}

impl InMemoryProvider {
    /// A provider with unlimited capacity that supports atomic increases.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next increase fails with `category` and `message`.
    pub fn fail_next(&self, category: ErrorCategory, message: &str) {
        self.lock()
            .failures
            .push_back((category, message.to_string()));
    }

    /// The provider group `provider_id` can start only `machines` more.
    pub fn set_capacity(&self, provider_id: &str, machines: usize) {
        self.lock()
            .capacity
            .insert(provider_id.to_string(), machines);
    }

    /// The next increase is applied but its answer is lost: the caller gets an
    /// [`ErrorCategory::Unknown`] failure, as after a deadline that passed
    /// while the provider was starting the machines.
    pub fn lose_next_answer(&self) {
        self.lock().lose_answers += 1;
    }

    /// Atomic increases fail with [`ErrorCategory::NotImplemented`], as a
    /// plain externalgrpc provider would.
    pub fn disable_atomic(&self) {
        self.lock().no_atomic = true;
    }

    /// Every call so far, in order.
    #[must_use]
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The increases so far, in order.
    #[must_use]
    pub fn increases(&self) -> Vec<IncreaseRequest> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Increase(r) => Some(r),
                Call::DeleteUnregistered { .. } | Call::DeleteNodes { .. } => None,
            })
            .collect()
    }

    /// Node names deleted by scale-down so far, in order.
    #[must_use]
    pub fn deleted_nodes(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .flat_map(|c| match c {
                Call::DeleteNodes { nodes, .. } => nodes,
                _ => Vec::new(),
            })
            .filter(|name| !name.is_empty())
            .collect()
    }

    /// Provider ids deleted so far (machines given back by instance id), in order.
    #[must_use]
    pub fn deleted_ids(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .flat_map(|c| match c {
                Call::DeleteNodes { provider_ids, .. } => provider_ids,
                _ => Vec::new(),
            })
            .filter(|id| !id.is_empty())
            .collect()
    }

    fn do_increase(&self, request: &IncreaseRequest) -> Result<Increased, ScaleError> {
        let done = self.apply_increase(request)?;
        let mut state = self.lock();
        if state.lose_answers > 0 {
            state.lose_answers -= 1;
            return Err(ScaleError::new(
                &request.group,
                "increase",
                ErrorCategory::Unknown,
                "deadline exceeded after the request was sent",
            ));
        }
        Ok(done)
    }

    fn apply_increase(&self, request: &IncreaseRequest) -> Result<Increased, ScaleError> {
        let mut state = self.lock();
        state.calls.push(Call::Increase(request.clone()));
        if let Some(done) = state.answered.get(&request.request_id) {
            return Ok(done.clone());
        }
        let operation = if request.atomic_min.is_some() {
            "atomically increase"
        } else {
            "increase"
        };
        if let Some((category, message)) = state.failures.pop_front() {
            return Err(ScaleError::new(
                &request.group,
                operation,
                category,
                message,
            ));
        }
        if request.atomic_min.is_some() && state.no_atomic {
            return Err(ScaleError::new(
                &request.group,
                operation,
                ErrorCategory::NotImplemented,
                "AtomicIncreaseSize is not implemented",
            ));
        }
        let available = state
            .capacity
            .get(&request.group.provider_id)
            .copied()
            .unwrap_or(usize::MAX);
        let wanted_at_least = request.atomic_min.unwrap_or(request.count);
        if available < wanted_at_least {
            return Err(ScaleError::new(
                &request.group,
                operation,
                ErrorCategory::OutOfCapacity,
                format!("only {available} machine(s) available, {wanted_at_least} needed"),
            ));
        }
        let started = request.count.min(available);
        if let Some(left) = state.capacity.get_mut(&request.group.provider_id) {
            *left -= started;
        }
        let first = state.next_id;
        state.next_id += started;
        let instance_ids = (first..first + started)
            .map(|i| format!("{}-{i}", request.group.provider_id))
            .collect();
        let done = Increased {
            started,
            instance_ids,
        };
        state
            .answered
            .insert(request.request_id.clone(), done.clone());
        Ok(done)
    }
}

impl ScaleExecutor for InMemoryProvider {
    fn increase<'a>(
        &'a self,
        request: &'a IncreaseRequest,
    ) -> BoxFuture<'a, Result<Increased, ScaleError>> {
        Box::pin(async move { self.do_increase(request) })
    }

    fn delete_unregistered<'a>(
        &'a self,
        group: &'a GroupRef,
        names: &'a [String],
    ) -> BoxFuture<'a, Result<(), ScaleError>> {
        Box::pin(async move {
            self.lock().calls.push(Call::DeleteUnregistered {
                group: group.clone(),
                names: names.to_vec(),
            });
            Ok(())
        })
    }

    fn delete_nodes<'a>(
        &'a self,
        group: &'a GroupRef,
        nodes: &'a [NodeToDelete],
    ) -> BoxFuture<'a, Result<(), ScaleError>> {
        Box::pin(async move {
            let mut state = self.lock();
            state.calls.push(Call::DeleteNodes {
                group: group.clone(),
                nodes: nodes.iter().map(|n| n.name.clone()).collect(),
                provider_ids: nodes.iter().map(|n| n.provider_id.clone()).collect(),
            });
            match state.failures.pop_front() {
                Some((category, message)) => {
                    Err(ScaleError::new(group, "delete nodes of", category, message))
                }
                None => Ok(()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: &str, count: usize, atomic_min: Option<usize>) -> IncreaseRequest {
        IncreaseRequest {
            group: GroupRef {
                name: "gpu".into(),
                provider: "fake".into(),
                provider_id: "gpu-pool".into(),
            },
            count,
            atomic_min,
            request_id: id.into(),
        }
    }

    #[tokio::test]
    async fn atomic_increase_starts_all_or_none() {
        let p = InMemoryProvider::new();
        p.set_capacity("gpu-pool", 3);
        let err = p.increase(&request("r1", 4, Some(4))).await.unwrap_err();
        assert_eq!(err.category, ErrorCategory::OutOfCapacity);
        let ok = p.increase(&request("r2", 4, Some(2))).await.unwrap();
        assert_eq!(ok.started, 3);
        assert_eq!(ok.instance_ids.len(), 3);
    }

    #[tokio::test]
    async fn a_retried_request_id_starts_nothing_new() {
        let p = InMemoryProvider::new();
        let first = p.increase(&request("r1", 2, None)).await.unwrap();
        let again = p.increase(&request("r1", 2, None)).await.unwrap();
        assert_eq!(first, again);
        let third = p.increase(&request("r2", 1, None)).await.unwrap();
        assert_eq!(third.instance_ids, vec!["gpu-pool-2".to_string()]);
    }

    #[tokio::test]
    async fn scripted_failure_and_missing_atomic_support() {
        let p = InMemoryProvider::new();
        p.fail_next(ErrorCategory::Quota, "vCPU quota");
        let err = p.increase(&request("r1", 1, None)).await.unwrap_err();
        assert_eq!(err.category, ErrorCategory::Quota);
        assert!(err.to_string().contains("vCPU quota"), "{err}");
        p.disable_atomic();
        let err = p.increase(&request("r2", 2, Some(2))).await.unwrap_err();
        assert_eq!(err.category, ErrorCategory::NotImplemented);
        assert_eq!(p.increases().len(), 2);
    }
}
