//! Why the allocator could not decide whether a device is usable on a node:
//! errors that upstream's allocator returns (and that fail the pod), kept
//! as values until they become an [`AllocError`](super::AllocError).

use crate::objects::ObjectRef;
use crate::selectors::NodeMatchError;

/// Why a pool's slices could not be gathered for a node (upstream
/// `GatherPools`): a node selector that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GatherError {
    /// A slice's own node selector.
    #[error("failed to perform node selection for slice {slice}: {source}")]
    Slice {
        /// The slice's name.
        slice: String,
        /// The selector's error.
        source: NodeMatchError,
    },
    /// One device's node selector (per-device node selection).
    #[error("failed to perform node selection for device {device} in slice {slice}: {source}")]
    Device {
        /// The device's name.
        device: String,
        /// The slice's name.
        slice: String,
        /// The selector's error.
        source: NodeMatchError,
    },
}

/// Where a CEL selector came from: the DeviceClass or the claim's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SelectorOwner {
    /// A DeviceClass, by name.
    Class(String),
    /// A ResourceClaim.
    Claim(ObjectRef),
}

impl std::fmt::Display for SelectorOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SelectorOwner::Class(name) => write!(f, "class {name}"),
            SelectorOwner::Claim(claim) => write!(f, "claim {claim}"),
        }
    }
}

/// Why upstream's `isSelectable` failed for a device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SelectError {
    /// A class selector without a CEL expression.
    #[error("class {class}: selector #{index}: CEL expression empty (unsupported selector type?)")]
    EmptyClassSelector {
        /// The DeviceClass.
        class: String,
        /// The selector's position.
        index: usize,
    },
    /// A selector that does not compile.
    #[error("{owner}: selector #{index}: CEL compile error: {message}")]
    Compile {
        /// The class or claim holding it.
        owner: SelectorOwner,
        /// The selector's position.
        index: usize,
        /// The compiler's message.
        message: String,
    },
    /// A selector that failed on this device.
    #[error("{owner}: selector #{index} on device {device}: CEL runtime error: {message}")]
    Runtime {
        /// The class or claim holding it.
        owner: SelectorOwner,
        /// The selector's position.
        index: usize,
        /// `driver/pool/device`.
        device: String,
        /// The evaluator's message.
        message: String,
    },
    /// The device's own node selector does not parse.
    #[error(transparent)]
    NodeSelection(#[from] NodeMatchError),
}
