//! `kubectl apply -f` for the stack: objects from (multi-document) YAML created or updated
//! through the API, whatever their kind, found by discovery (so a CRD applied earlier serves
//! its kind to the next document).

use std::path::Path;

use anyhow::{Context, bail};
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};
use kube::{Api, Client};
use serde_json::Value;

/// The field manager the stack's writes carry.
pub const FIELD_MANAGER: &str = "dra-local-stack";

/// The objects of a YAML text: `kind: List` items and every document, empty documents skipped.
///
/// # Errors
/// Text that is not YAML.
pub fn parse_objects(text: &str, origin: &str) -> anyhow::Result<Vec<Value>> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).with_context(|| format!("{origin} is not YAML"))?;
    let mut objects = Vec::new();
    for document in documents {
        match document.get("kind").and_then(Value::as_str) {
            Some("List") => {
                objects.extend(document["items"].as_array().cloned().unwrap_or_default());
            }
            Some(_) => objects.push(document),
            None if document.is_null() => {}
            None => bail!("{origin}: a document has no kind"),
        }
    }
    Ok(objects)
}

fn gvk_of(object: &Value) -> anyhow::Result<GroupVersionKind> {
    let api_version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .context("an object has no apiVersion")?;
    let kind = object
        .get("kind")
        .and_then(Value::as_str)
        .context("an object has no kind")?;
    let gv = dra_sim::api_version::ApiGroupVersion::parse(api_version);
    Ok(GroupVersionKind::gvk(gv.group(), gv.version(), kind))
}

/// Creates or updates `objects` (server-side apply, forced), in order.
///
/// # Errors
/// A kind the server does not serve, or a write the server refuses (its message included).
pub async fn apply_objects(client: &Client, objects: &[Value]) -> anyhow::Result<Vec<String>> {
    let mut discovery = Discovery::new(client.clone()).run().await?;
    let mut applied = Vec::new();
    for object in objects {
        let gvk = gvk_of(object)?;
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .context("an object has no metadata.name")?
            .to_owned();
        let found = match discovery.resolve_gvk(&gvk) {
            Some(found) => found,
            None => {
                // A CRD applied just before: discover again.
                discovery = Discovery::new(client.clone()).run().await?;
                discovery.resolve_gvk(&gvk).with_context(|| {
                    format!(
                        "the server does not serve {} {}",
                        gvk.api_version(),
                        gvk.kind
                    )
                })?
            }
        };
        let (resource, caps) = found;
        let api: Api<DynamicObject> = if caps.scope == Scope::Namespaced {
            let namespace = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("default");
            Api::namespaced_with(client.clone(), namespace, &resource)
        } else {
            Api::all_with(client.clone(), &resource)
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(&name, &params, &Patch::Apply(object))
            .await
            .with_context(|| format!("applying {} {name}", gvk.kind))?;
        applied.push(format!("{}/{name}", resource.plural));
    }
    Ok(applied)
}

/// Applies every `.yaml`/`.yml`/`.json` file of `path` (a file or a directory, in name order).
///
/// # Errors
/// Unreadable files, or as [`apply_objects`].
pub async fn apply_path(client: &Client, path: &Path) -> anyhow::Result<Vec<String>> {
    let mut files = Vec::new();
    if path.is_dir() {
        for entry in
            std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))?
        {
            let file = entry?.path();
            if matches!(
                file.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            ) {
                files.push(file);
            }
        }
        files.sort();
    } else {
        files.push(path.to_path_buf());
    }
    let mut applied = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        let objects = parse_objects(&text, &file.display().to_string())?;
        applied.extend(apply_objects(client, &objects).await?);
    }
    Ok(applied)
}

/// Applies the NodeGroup CRD, generated from the Rust types (`dra-autoscaler crd`).
///
/// # Errors
/// As [`apply_objects`].
pub async fn apply_crd(client: &Client) -> anyhow::Result<()> {
    let crd = serde_json::to_value(dra_api::crd())?;
    apply_objects(client, &[crd]).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_documents_become_objects() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n";
        let objects = parse_objects(text, "test").expect("yaml");
        let names: Vec<&str> = objects
            .iter()
            .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
            .collect();
        assert_eq!(names, vec!["a", "b"]);
        assert!(parse_objects("metadata: {name: x}\n", "test").is_err());
        let gvk = gvk_of(&objects[0]).expect("gvk");
        assert_eq!(
            (gvk.group.as_str(), gvk.version.as_str(), gvk.kind.as_str()),
            ("", "v1", "ConfigMap")
        );
    }
}
