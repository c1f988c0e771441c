//! The `NodeGroup` custom resource (`dra-autoscaler.io/v1alpha1`, cluster-scoped, short name
//! `ng`): what a pool of identical machines looks like (template Node plus the ResourceSlices
//! its DRA drivers publish), how many of them may exist, what they cost and which reservation
//! backs them.
//!
//! The crate is data and pure functions of it. The controller reads `NodeGroup` objects and
//! writes their status; the planner simulates the template; cloud providers (the fake one among
//! them) read the same spec shape from YAML and register the same Node ([`new_node`]). Nothing
//! here does I/O, so the pure planner can depend on it.
//!
//! * [`nodegroup`]: the spec and status types.
//! * [`scale_down`]: the optional `spec.scaleDown` settings and `status.unneededNodes`.
//! * [`validate`]: [`NodeGroupSpec::validate`] and its typed errors.
//! * [`crdgen`]: the CustomResourceDefinition YAML, for `dra-autoscaler crd`.
//! * [`new_node`]: the Node and ResourceSlices a group's new machine has, shared by the planner
//!   and every provider.

pub mod crdgen;
pub mod new_node;
pub mod nodegroup;
pub mod scale_down;
pub mod validate;

pub use crdgen::{CrdGenError, crd, crd_yaml};
pub use new_node::{NewNode, SLICE_NODE_LABEL, new_node, new_node_label};
pub use nodegroup::{
    CapacityType, LastScaleUp, NODE_GROUP_API_VERSION, NODE_GROUP_LABEL, NodeGroup, NodeGroupSpec,
    NodeGroupStatus, NodeTemplate, Reservation, ScaleUpOutcome, TopologyDomain, UnconfirmedRequest,
    UpcomingNode,
};
pub use scale_down::{BadDuration, ScaleDownPolicy, UnneededNode, parse_duration};
pub use validate::{InvalidNodeGroup, ValidationError};
