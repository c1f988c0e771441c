//! Why a claim's requests cannot be allocated anywhere (upstream's `validateDeviceRequest` and
//! the claim loop of `Allocate`): fatal for the pod, so the scheduler gives up on every node.
//! The words are upstream's; the values say which claim, request and field.

use crate::objects::ObjectRef;
use crate::quantity::QuantityError;

use super::capacity::CapacityError;
use super::select_error::SelectError;

/// The request an error is about: `claim <ns>/<name>, request <name>` as upstream prints it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("claim {claim}, request {request}")]
pub(crate) struct RequestAt {
    /// The claim.
    pub claim: ObjectRef,
    /// The request (or subrequest) name.
    pub request: String,
}

/// A request that fails the pod on every node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RequestError {
    /// `firstAvailable` with DRAPrioritizedList off.
    #[error("{at}: has subrequests, but the DRAPrioritizedList feature is disabled")]
    SubrequestsDisabled {
        /// The request.
        at: RequestAt,
    },
    /// Capacity requests with DRAConsumableCapacity off (incubating and experimental
    /// allocators; the stable one ignores them).
    #[error(
        "claim {claim}, {kind} {name}: has capacity requests, but the DRAConsumableCapacity feature is disabled"
    )]
    CapacityDisabled {
        /// The claim.
        claim: ObjectRef,
        /// `request` or `subrequest`.
        kind: &'static str,
        /// Its name.
        name: String,
    },
    /// Neither `exactly` nor a device class name.
    #[error("{at}: missing device class name (unsupported request type?)")]
    MissingClassName {
        /// The request.
        at: RequestAt,
    },
    /// A selector without a CEL expression.
    #[error("{at}, selector #{index}: CEL expression empty (unsupported selector type?)")]
    EmptySelector {
        /// The request.
        at: RequestAt,
        /// The selector's position.
        index: usize,
    },
    /// `adminAccess` with DRAAdminAccess off.
    #[error("{at}: admin access is requested, but the feature is disabled")]
    AdminAccessDisabled {
        /// The request.
        at: RequestAt,
    },
    /// The device class does not exist.
    #[error(
        "{at}: could not retrieve device class {class}: deviceclass.resource.k8s.io {class:?} not found"
    )]
    ClassNotFound {
        /// The request.
        at: RequestAt,
        /// The class name.
        class: String,
    },
    /// A capacity request that is not a quantity.
    #[error("{at}: capacity request {name}: {source}")]
    CapacityQuantity {
        /// The request.
        at: RequestAt,
        /// The capacity's name.
        name: String,
        /// Why it does not parse.
        source: QuantityError,
    },
    /// `allocationMode: All` while a pool is being updated.
    #[error("{at}: asks for all devices, but resource pool {pool} is currently being updated")]
    AllPoolIncomplete {
        /// The request.
        at: RequestAt,
        /// `driver/pool`.
        pool: String,
    },
    /// `allocationMode: All` while a pool is invalid.
    #[error("{at}: asks for all devices, but resource pool {pool} is currently invalid")]
    AllPoolInvalid {
        /// The request.
        at: RequestAt,
        /// `driver/pool`.
        pool: String,
    },
    /// A selector failed while listing the devices of `allocationMode: All`.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// A device's capacity cannot be checked while listing `allocationMode: All`.
    #[error("{at}: checking capacity for device {device}: {source}")]
    CapacityCheck {
        /// The request.
        at: RequestAt,
        /// The device.
        device: String,
        /// Why.
        source: CapacityError,
    },
    /// An `allocationMode` other than `ExactCount` and `All`.
    #[error("{at}: unsupported count mode {mode}")]
    UnsupportedMode {
        /// The request.
        at: RequestAt,
        /// The mode given.
        mode: String,
    },
}
