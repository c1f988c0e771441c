//! Why a ProvisioningRequest's pod sets cannot be made into the pods it stands for: the
//! request is reported invalid (its `Provisioned` condition says so) and nothing is planned
//! for it.

use crate::templates::TemplateError;

/// A ProvisioningRequest's pod sets that cannot be made into pods.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PodSetError {
    /// `spec.podSets` absent or empty.
    #[error("field spec.podSets: at least one pod set is required")]
    NoPodSets,
    /// A pod set without `podTemplateRef.name`.
    #[error("field spec.podSets[{index}].podTemplateRef.name is required")]
    NoTemplateName {
        /// The pod set's position.
        index: usize,
    },
    /// A pod set whose `count` is not an integer of at least 1.
    #[error("field spec.podSets[{index}].count: expected an integer ≥ 1")]
    BadCount {
        /// The pod set's position.
        index: usize,
    },
    /// The PodTemplate a pod set names cannot be found or read.
    #[error("spec.podSets[{index}]: {source}")]
    Template {
        /// The pod set's position.
        index: usize,
        /// Why (boxed: template errors carry whole field paths and values).
        source: Box<TemplateError>,
    },
    /// The PodTemplate does not make a pod.
    #[error("spec.podSets[{index}]: PodTemplate {template}: {source}")]
    Pod {
        /// The pod set's position.
        index: usize,
        /// The PodTemplate's name.
        template: String,
        /// Why.
        source: Box<TemplateError>,
    },
}
