//! The per-node check: would the scheduler put this pod on this node, and
//! with which devices? Filters first, then the pod's allocated claims, then
//! the allocator for the rest. Nothing is committed here.

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};

use super::{ObjectKey, PodClaims, Snapshot};
use crate::dra::{AllocError, AllocateOutcome};
use crate::filters::extended_resource_claim;
use crate::reason::{Code, Reason, Words};
use crate::selectors::ParsedNodeSelector;

/// What one node says about one pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The pod fits; one allocation per claim that needed allocating.
    Fits(Vec<AllocationResult>),
    /// This node refuses the pod, for the reason given (upstream's words first).
    Refused(Reason),
    /// The scheduler would fail the pod outright (not try other nodes).
    Fatal(Reason),
    /// PreFilter refuses the pod on every node (unschedulable, not an error).
    Unresolvable(Reason),
}

impl Snapshot {
    /// Would the scheduler put the pod on this node, and with which devices?
    /// Runs the filters, checks the pod's allocated claims are usable here,
    /// then allocates its other claims. Nothing is committed.
    pub fn check(&mut self, pod_index: usize, node_index: usize, claims: &PodClaims) -> Verdict {
        self.check_explaining(pod_index, node_index, claims, true)
    }

    /// [`Snapshot::check`] for callers that only ask whether the pod fits:
    /// the same verdict, but a filter's refusal carries its code and plugin
    /// without words or node (spelling them out allocates, and a first-fit
    /// scan over thousands of nodes throws every refusal away).
    pub fn check_fit(
        &mut self,
        pod_index: usize,
        node_index: usize,
        claims: &PodClaims,
    ) -> Verdict {
        self.check_explaining(pod_index, node_index, claims, false)
    }

    fn check_explaining(
        &mut self,
        pod_index: usize,
        node_index: usize,
        claims: &PodClaims,
        explain: bool,
    ) -> Verdict {
        for key in &claims.allocated {
            self.parse_allocation_selector(key);
        }
        // A pod without spread or pod-affinity terms, in a cluster without
        // anti-affinity, prepares to the same result whatever is placed:
        // keep it. Others are prepared again after every change.
        let stateless = !self.labels_matter && self.signature(pod_index).is_some();
        if stateless {
            if !self.stateless_prepared.contains_key(&pod_index) {
                let prepared = self.filters.prepare(&self.pods[pod_index], &self.nodes);
                self.stateless_prepared.insert(pod_index, prepared);
            }
        } else {
            let fresh = matches!(&self.prepared, Some((p, g, _)) if *p == pod_index && *g == self.generation);
            if !fresh {
                let prepared = self.filters.prepare(&self.pods[pod_index], &self.nodes);
                self.prepared = Some((pod_index, self.generation, prepared));
            }
        }
        let entry = if stateless {
            self.stateless_prepared.get(&pod_index)
        } else {
            self.prepared.as_ref().map(|(_, _, p)| p)
        };
        let Some(prepared) = entry else {
            return Verdict::Unresolvable(Reason::new(
                Code::Internal,
                "internal: PreFilter result missing",
            ));
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(reason) => return Verdict::Unresolvable(reason.clone()),
        };
        // The DynamicResources PreFilter parses allocated claims' node
        // selectors (strictly): one that does not parse fails the pod.
        for key in &claims.allocated {
            if let Some(Err(e)) = self.allocation_selectors.get(key) {
                return Verdict::Fatal(Reason::new(
                    Code::InvalidAllocationNodeSelector,
                    format!("resourceclaim {key}: allocation nodeSelector: {e}"),
                ));
            }
        }
        let node = &self.nodes[node_index];
        let pod = &self.pods[pod_index];
        let node_name = node.metadata.name.as_deref();
        if let Err(refusal) = self.filters.check(prepared, node_index, node) {
            return Verdict::Refused(if explain {
                refusal.reason(prepared, node)
            } else {
                refusal.unexplained()
            });
        }
        let extended = if prepared.extended_via_dra.is_empty() {
            None
        } else {
            extended_resource_claim(pod, node, &self.device_classes, &self.gates)
        };
        // Upstream's Filter notes an allocated claim that is not available
        // here, but runs the allocator for the others first: its error or
        // failure is what the node answers (dynamicresources.go, Filter).
        let unavailable = claims.allocated.iter().find_map(|key| {
            match self.allocation_selectors.get(key) {
                Some(Ok(selector)) if !selector.matches(node) => Some(
                    Reason::new(
                        Code::ClaimNotAvailableOnNode,
                        format!(
                            "resourceclaim not available on the node: {key} is allocated for other nodes"
                        ),
                    )
                    .on(node_name),
                ),
                _ => None,
            }
        });
        if claims.to_allocate.is_empty() && extended.is_none() {
            return match unavailable {
                Some(reason) => Verdict::Refused(reason),
                None => Verdict::Fits(Vec::new()),
            };
        }
        let mut claim_refs: Vec<&ResourceClaim> = claims
            .to_allocate
            .iter()
            .filter_map(|k| self.claims.get(k))
            .collect();
        if let Some(claim) = &extended {
            claim_refs.push(claim);
        }
        let node_name = node_name.map(str::to_string);
        let outcome = self.dra.allocate(
            &self.nodes[node_index],
            &claim_refs,
            &self.allocated,
            &mut self.share_ids,
        );
        match outcome {
            Ok(AllocateOutcome::Allocated(allocations)) => match unavailable {
                Some(reason) => Verdict::Refused(reason),
                None => Verdict::Fits(allocations),
            },
            Ok(AllocateOutcome::Unschedulable { reasons }) => {
                Verdict::Refused(joined(reasons).on(node_name.as_deref()))
            }
            Err(AllocError::FailedOnNode(message)) => Verdict::Refused(
                Reason::new(Code::InvalidResourcePools, message).on(node_name.as_deref()),
            ),
            Err(AllocError::Fatal(message)) => {
                Verdict::Fatal(Reason::new(Code::AllocationError, message).on(node_name.as_deref()))
            }
        }
    }

    /// Runs the allocator for `claims` on node `node_index`.
    ///
    /// # Errors
    /// As [`DraCatalog::allocate`].
    pub fn allocate(
        &mut self,
        node_index: usize,
        claims: &[ObjectKey],
    ) -> Result<crate::dra::AllocateOutcome, crate::dra::AllocError> {
        let claim_refs: Vec<&ResourceClaim> =
            claims.iter().filter_map(|k| self.claims.get(k)).collect();
        self.dra.allocate(
            &self.nodes[node_index],
            &claim_refs,
            &self.allocated,
            &mut self.share_ids,
        )
    }

    /// Parses an allocated claim's node selector once (until its allocation
    /// changes), strictly as upstream's `NewNodeSelector`; claims without
    /// one are usable on every node and get no entry.
    fn parse_allocation_selector(&mut self, key: &ObjectKey) {
        if self.allocation_selectors.contains_key(key) {
            return;
        }
        let selector = self
            .claims
            .get(key)
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.allocation.as_ref())
            .and_then(|a| a.node_selector.as_ref());
        if let Some(selector) = selector {
            self.allocation_selectors
                .insert(key.clone(), ParsedNodeSelector::parse(selector));
        }
    }
}

/// The allocator's reasons as one, joined with "; " as we print them: the
/// first reason's code (a time-out is alone), upstream's bare words when
/// there is no diagnosis.
fn joined(reasons: Vec<Reason>) -> Reason {
    let Some(code) = reasons.first().map(|r| r.code) else {
        return Reason::new(Code::CannotAllocateAllClaims, "cannot allocate all claims");
    };
    let words = Words::join(reasons.into_iter().map(|r| r.detail).collect(), "; ");
    Reason::with_words(code, words)
}
