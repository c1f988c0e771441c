//! Selectors and label syntax, one module for every user: label selectors
//! (PodTopologySpread, InterPodAffinity, namespace selectors), node
//! selectors (NodeAffinity, allocated claims, ResourceSlices and devices)
//! and label key/value validation. Each is parsed once into a form that only
//! matches afterwards.
//!
//! - [`syntax`]: label keys and values as apimachinery validates them;
//! - [`requirement`]: one label requirement (`labels.NewRequirement`);
//! - [`label`]: `metav1.LabelSelector`, canonical and hashable;
//! - [`node`]: `v1.NodeSelector`, strict or lazy as upstream reads it.

pub mod label;
pub mod node;
pub mod requirement;
pub mod syntax;

pub use label::{Selector, SelectorParseError};
pub use node::{
    FieldError, NODE_NAME_FIELD, NodeMatchError, NodeSelectorError, ParsedNodeSelector,
    RequirementProblem, node_matches,
};
pub use requirement::{Labels, Op, Requirement};
pub use syntax::{is_dns1123_subdomain, is_qualified_name, is_valid_label_value};
