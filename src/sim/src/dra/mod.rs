//! kube-scheduler's structured DRA allocator (the "incubating" variant of
//! 1.36+), re-implemented over a snapshot.
//!
//! For one node (real, or a node-group template) and a pod's unallocated
//! ResourceClaims, [`DraCatalog::allocate`] decides what upstream's
//! `Allocate(node, claims)` decides, device for device:
//!
//! ```text
//!  slices ──► catalog (converted once, taint rules applied)
//!                │  per node, cached:  pools ──► per state stamp: pool states
//!                ▼
//!  claims ──► validate requests (gates, classes, sizes, All lists)
//!                ▼
//!           depth-first search (claims → requests → devices, first fit)
//!                ▼
//!           results + config + nodeSelector   |  reasons  |  error
//! ```
//!
//! Semantics follow upstream's `incubating` allocator as of the 1.37 cycle
//! (late July 2026) with every feature gate honoured: pools sorted by
//! (driver, pool) with binding-condition pools last, combinations rather
//! than permutations within a request, global backtracking over
//! `firstAvailable` alternatives, a rejected candidate rolled back completely
//! (kubernetes#140431), `distinctAttribute` compared across every device held
//! (#140600), `All` sized by static capacity (#140769), milli-unit capacity
//! ranges with `DRAFractionalCapacityRange`. With `DRAListTypeAttributes` or
//! `DRADeviceCompatibilityGroups` on, upstream switches to its experimental
//! variant; we follow it where those gates act: constraints compare list
//! values as sets, compatibility groups are enforced per counter set.
//!
//! The stable variant (the 1.34/1.35 defaults) keeps binding-condition pools
//! in plain (driver, pool) order, one of its Go map orders (`pools`).
//!
//! Deliberate differences: a quantity that does not parse (which an API
//! server would have refused) makes its pool invalid; on failure we add
//! reasons that upstream does not compute.

mod capacity;
mod catalog;
mod cel_cache;
mod compat_groups;
mod constraints;
mod device_taints;
mod diagnose;
mod feasibility;
mod inventory;
mod model;
mod pool_state;
mod pools;
mod request_error;
mod requests;
mod results;
mod search;
mod select_error;
mod state;

#[cfg(test)]
mod tests;

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};

pub use crate::quantity;
pub use crate::selectors::ParsedNodeSelector;
pub use catalog::{DraCatalog, TIMED_OUT};
pub use state::{AllocatedState, DeviceId};

use crate::gates::FeatureGates;
use crate::objects::ObjectRef;
use crate::reason::Reason;

/// The result of one `allocate` call that did not fail.
#[derive(Debug, Clone, PartialEq)]
pub enum AllocateOutcome {
    /// One AllocationResult per input claim, in order.
    Allocated(Vec<AllocationResult>),
    /// The claims cannot fit on this node (upstream returns nil, nil).
    Unschedulable {
        /// Why, each a sentence starting "cannot allocate all claims: "
        /// ([`Code::CannotAllocateAllClaims`]), or the search's time-out
        /// ([`Code::AllocationTimedOut`]).
        ///
        /// [`Code::CannotAllocateAllClaims`]: crate::reason::Code::CannotAllocateAllClaims
        /// [`Code::AllocationTimedOut`]: crate::reason::Code::AllocationTimedOut
        reasons: Vec<Reason>,
    },
}

/// Why `allocate` failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Node-specific failure: no fit, and some pool is invalid.
    #[error("{0}")]
    FailedOnNode(String),
    /// Fatal for the pod: upstream aborts scheduling it on every node.
    #[error("{0}")]
    Fatal(String),
}

/// Deterministic share IDs for allocations of multi-allocatable devices:
/// UUID-shaped strings from a counter, so simulations are reproducible.
#[derive(Debug, Clone, Default)]
pub struct ShareIdGenerator {
    next: u64,
}

impl ShareIdGenerator {
    /// The next ID.
    pub fn next_id(&mut self) -> String {
        self.next += 1;
        format!("00000000-0000-4000-8000-{:012x}", self.next)
    }
}

/// Work counters, for benchmarks and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// `allocate` calls.
    pub allocate_calls: u64,
    /// Search steps (upstream's `NumAllocateOneInvocations`).
    pub allocate_one_invocations: u64,
    /// Calls answered "no allocation" by counting, without a search.
    pub proven_infeasible: u64,
}

/// Which of upstream's three allocator implementations the scheduler runs.
/// `structured.NewAllocator` takes the first (stable, incubating,
/// experimental) whose supported features cover every enabled one, so the
/// gates decide it, and the variants differ on fields of disabled features.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Variant {
    /// Admin access, prioritized lists, partitionable devices, device taints
    /// only. Knows no `distinctAttribute` constraint and no capacity
    /// requests.
    Stable,
    /// Adds binding conditions with device status, and consumable capacity.
    Incubating,
    /// Adds list-type attributes and compatibility groups.
    Experimental,
}

/// The allocator's view of the feature gates (upstream `Features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // one flag per upstream feature
pub(crate) struct Features {
    pub admin_access: bool,
    pub prioritized_list: bool,
    pub partitionable_devices: bool,
    pub device_taints: bool,
    pub device_taint_rules: bool,
    pub consumable_capacity: bool,
    pub fractional_capacity_range: bool,
    pub binding_and_status: bool,
    pub list_type_attributes: bool,
    pub compatibility_groups: bool,
    pub optional_node_operations: bool,
}

impl Features {
    /// The variant upstream picks for these features.
    pub(crate) fn variant(&self) -> Variant {
        if self.list_type_attributes || self.compatibility_groups {
            Variant::Experimental
        } else if self.consumable_capacity || self.binding_and_status {
            Variant::Incubating
        } else {
            Variant::Stable
        }
    }

    pub(crate) fn from_gates(g: &FeatureGates) -> Self {
        Features {
            admin_access: g.admin_access,
            prioritized_list: g.prioritized_list,
            partitionable_devices: g.partitionable_devices,
            device_taints: g.device_taints,
            device_taint_rules: g.device_taint_rules,
            consumable_capacity: g.consumable_capacity,
            fractional_capacity_range: g.fractional_capacity_range,
            binding_and_status: g.binding_and_status(),
            list_type_attributes: g.list_type_attributes,
            compatibility_groups: g.device_compatibility_groups,
            optional_node_operations: g.optional_node_operations,
        }
    }
}

/// The claim, printed `namespace/name` as klog prints an object reference.
pub(crate) fn claim_ref(claim: &ResourceClaim) -> ObjectRef {
    ObjectRef::of(&claim.metadata)
}
