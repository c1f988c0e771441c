//! Our side: the objects through dra-sim's loader and `simulate`, with the
//! gates `dra-autoscaler simulate --kubernetes-version V --feature-gates G`
//! selects (the CLI's own path for a snapshot without NodeGroups).

use dra_sim::objects::Origin;
use dra_sim::report::Report;
use dra_sim::{FeatureGates, KubeVersion, Loader};
use serde_json::Value;

/// The gates of `--kubernetes-version` and `--feature-gates`.
///
/// # Errors
/// A flag our CLI would refuse.
pub fn gates(version: KubeVersion, feature_gates: &str) -> Result<FeatureGates, String> {
    let mut gates = FeatureGates::for_version(version);
    gates
        .apply_flag(feature_gates)
        .map_err(|e| format!("--feature-gates: {e}"))?;
    Ok(gates)
}

/// Loads `objects` and places their pending pods.
///
/// # Errors
/// An object the loader refuses (the whole snapshot is refused, as
/// `simulate` refuses it), or gates our CLI would refuse.
pub fn simulate(
    objects: &[Value],
    version: KubeVersion,
    feature_gates: &str,
) -> Result<Report, String> {
    let gates = gates(version, feature_gates)?;
    let mut loader = Loader::new();
    for (document, object) in objects.iter().enumerate() {
        let origin = Origin {
            source: "snapshot".into(),
            document,
            item: None,
        };
        loader
            .add_value(origin, object.clone())
            .map_err(|e| e.to_string())?;
    }
    Ok(dra_sim::simulate::simulate(loader.finish().objects, gates))
}

/// Reads a snapshot file's text (YAML, multi-document, or JSON, with
/// `kind: List` expanded) into its objects, as `simulate` would.
///
/// # Errors
/// Text that is not YAML or JSON.
pub fn parse_snapshot(source: &str, text: &str) -> Result<Vec<Value>, String> {
    let documents: Vec<Value> = if text.trim_start().starts_with('{') {
        vec![serde_json::from_str(text).map_err(|e| format!("{source}: {e}"))?]
    } else {
        // As the loader parses YAML: 1.2 booleans only (kubectl prints
        // true/false; `on` stays a string).
        let options = serde_saphyr::options! { strict_booleans: true };
        serde_saphyr::from_multiple_with_options(text, options)
            .map_err(|e| format!("{source}: not valid YAML: {e}"))?
    };
    let mut objects = Vec::new();
    for document in documents {
        flatten(document, &mut objects);
    }
    Ok(objects)
}

fn flatten(document: Value, out: &mut Vec<Value>) {
    if document.is_null() {
        return;
    }
    let is_list = document
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && document.get("items").is_some();
    if is_list {
        if let Some(Value::Array(items)) = document.get("items") {
            for item in items {
                flatten(item.clone(), out);
            }
        }
    } else {
        out.push(document);
    }
}
