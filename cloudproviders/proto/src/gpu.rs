//! `GPULabel` and `GetAvailableGPUTypes` from what a provider's templates say: the one rule
//! every provider answers with.
//!
//! cluster-autoscaler reads a node that carries the GPU label as a GPU node. Over externalgrpc
//! it cannot learn that a node's GPUs are DRA devices (`GpuConfig.DraDriverName` is never set
//! there), so its GPU readiness check (`GpuCustomResourcesProcessor`) holds every node with the
//! label and no GPU extended resource (`nvidia.com/gpu`, `amd.com/gpu`, ...) in allocatable as
//! unready, for good: a DRA-only GPU node has no such resource. The label must therefore name
//! only nodes whose GPUs are extended resources (the device plugin's).
//!
//! * [`gpu_label`]: the provider's usual label (the one its cloud or GPU feature discovery puts
//!   on GPU nodes) unless a template carries it on a node without GPU extended resources; then
//!   [`NO_DRA_GPU_LABEL`], which no template carries. Device-plugin GPU nodes are still GPU
//!   nodes to cluster-autoscaler then, through their allocatable.
//! * [`gpu_types`]: the values templates give that label, the GPU types cluster-autoscaler
//!   compares a node's label value with (its GPU metrics; the keys are all it reads).
//!
//! cluster-autoscaler asks both once and keeps the answers for its lifetime.

use std::collections::BTreeSet;

use dra_api::NodeTemplate;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The GPU label when a template carries the provider's usual one with DRA-only GPUs: a key
/// none of our templates carries, so no DRA GPU node looks "GPU not ready".
pub const NO_DRA_GPU_LABEL: &str = "dra-autoscaler.io/device-plugin-gpu";

/// The extended resources cluster-autoscaler counts as GPUs (`gpu.GPUVendorResourceNames`).
pub const GPU_RESOURCES: [&str; 5] = [
    "nvidia.com/gpu",
    "habana.ai/gaudi",
    "gpu.intel.com/xe",
    "amd.com/gpu",
    "microsoft.com/directx",
];

/// Whether a template's allocatable has a GPU extended resource above zero, as
/// cluster-autoscaler's `NodeHasGpuAllocatable` checks.
#[must_use]
pub fn has_gpu_allocatable(template: &NodeTemplate) -> bool {
    let allocatable = template.effective_allocatable();
    GPU_RESOURCES
        .iter()
        .any(|name| allocatable.get(*name).is_some_and(is_positive))
}

/// Whether a quantity is above zero: its number (what precedes a suffix or exponent) has a
/// non-zero digit and no minus sign. Device counts are whole numbers; nothing finer is needed.
fn is_positive(quantity: &Quantity) -> bool {
    let text = quantity.0.trim();
    !text.starts_with('-')
        && text
            .trim_start_matches('+')
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .any(|c| matches!(c, '1'..='9'))
}

/// The label to answer `GPULabel` with: `preferred` unless one of `templates` carries it
/// without a GPU extended resource, else [`NO_DRA_GPU_LABEL`].
#[must_use]
pub fn gpu_label<'a>(
    preferred: &str,
    templates: impl IntoIterator<Item = &'a NodeTemplate>,
) -> String {
    let dra_only = templates
        .into_iter()
        .any(|t| t.labels.contains_key(preferred) && !has_gpu_allocatable(t));
    if dra_only {
        NO_DRA_GPU_LABEL.to_owned()
    } else {
        preferred.to_owned()
    }
}

/// The GPU types to answer `GetAvailableGPUTypes` with: the distinct non-empty values of
/// `label` on `templates`, sorted.
#[must_use]
pub fn gpu_types<'a>(
    label: &str,
    templates: impl IntoIterator<Item = &'a NodeTemplate>,
) -> Vec<String> {
    templates
        .into_iter()
        .filter_map(|t| t.labels.get(label))
        .filter(|v| !v.is_empty())
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const PRODUCT: &str = "nvidia.com/gpu.product";

    fn template(product: Option<&str>, extended: Option<(&str, &str)>) -> NodeTemplate {
        serde_json::from_value(serde_json::json!({
            "labels": product.map_or_else(|| serde_json::json!({}), |p| serde_json::json!({(PRODUCT): p})),
            "capacity": {"cpu": "8"},
            "allocatable": match extended {
                Some((name, n)) => serde_json::json!({"cpu": "8", (name): n}),
                None => serde_json::json!({"cpu": "8"}),
            },
        }))
        .unwrap()
    }

    #[test]
    fn device_plugin_templates_keep_the_usual_label() {
        let plugin = template(Some("NVIDIA-H100"), Some(("nvidia.com/gpu", "8")));
        let amd = template(Some("MI300X"), Some(("amd.com/gpu", "8")));
        let cpu = template(None, None);
        let all = [&plugin, &amd, &cpu];
        assert_eq!(gpu_label(PRODUCT, all), PRODUCT);
        assert_eq!(gpu_types(PRODUCT, all), ["MI300X", "NVIDIA-H100"]);
    }

    /// A labelled node without a GPU extended resource is what cluster-autoscaler's readiness
    /// check holds as unready; zero counts as absent, as in `NodeHasGpuAllocatable`.
    #[test]
    fn a_dra_only_gpu_template_with_the_label_moves_the_answer_off_it() {
        let plugin = template(Some("NVIDIA-H100"), Some(("nvidia.com/gpu", "8")));
        for dra in [
            template(Some("NVIDIA-H200"), None),
            template(Some("NVIDIA-H200"), Some(("nvidia.com/gpu", "0"))),
        ] {
            let label = gpu_label(PRODUCT, [&plugin, &dra]);
            assert_eq!(label, NO_DRA_GPU_LABEL);
            assert!(
                [&plugin, &dra]
                    .iter()
                    .all(|t| !t.labels.contains_key(&label)),
                "no template carries the answer"
            );
            assert!(gpu_types(&label, [&plugin, &dra]).is_empty());
        }
    }

    #[test]
    fn quantities_above_zero() {
        for (text, positive) in [
            ("8", true),
            ("1k", true),
            ("0.5", true),
            ("0", false),
            ("0m", false),
            ("0e3", false),
            ("-2", false),
            ("", false),
        ] {
            assert_eq!(is_positive(&Quantity(text.into())), positive, "{text:?}");
        }
    }

    #[test]
    fn without_gpu_templates_the_usual_label_stands_and_no_types() {
        let cpu = template(None, None);
        assert_eq!(gpu_label(PRODUCT, [&cpu]), PRODUCT);
        assert!(gpu_types(PRODUCT, [&cpu]).is_empty());
    }
}
