//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): what the apiextensions server
//! checks on a CRD write, the resources a CRD serves, and the status it reports.
//!
//! Once a CRD is stored its served versions are registered (discovery, CRUD, watch, status,
//! printer columns, short names, categories, schema validation and pruning) and its status
//! says `NamesAccepted` and `Established`, as upstream's controllers do a moment later.

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::{Value, json};

use crate::error::{ApiError, Cause};
use crate::resource::{PrinterColumn, ResourceDef};

/// Kind as upstream's validation messages name it.
const QUALIFIED_KIND: &str = "CustomResourceDefinition.apiextensions.k8s.io";

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn cause(field: &str, detail: String) -> Cause {
    Cause {
        field: field.to_owned(),
        detail,
    }
}

/// The rules of upstream's CRD validation that matter to clients here: naming, scope, exactly
/// one storage version, a schema per version.
fn problems(name: &str, crd: &CustomResourceDefinition) -> Vec<Cause> {
    let spec = &crd.spec;
    let mut found = Vec::new();
    if !spec.group.contains('.') {
        found.push(cause(
            "spec.group",
            format!(
                "Invalid value: {:?}: should be a domain with at least one dot",
                spec.group
            ),
        ));
    }
    if !is_dns_label(&spec.names.plural) {
        found.push(cause(
            "spec.names.plural",
            format!(
                "Invalid value: {:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'",
                spec.names.plural
            ),
        ));
    }
    if spec.names.kind.is_empty() {
        found.push(cause("spec.names.kind", "Required value".into()));
    }
    let expected = format!("{}.{}", spec.names.plural, spec.group);
    if name != expected {
        found.push(cause(
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if !matches!(spec.scope.as_str(), "Cluster" | "Namespaced") {
        found.push(cause(
            "spec.scope",
            format!(
                "Unsupported value: {:?}: supported values: \"Cluster\", \"Namespaced\"",
                spec.scope
            ),
        ));
    }
    if spec.versions.is_empty() {
        found.push(cause("spec.versions", "Required value".into()));
    }
    let storage = spec.versions.iter().filter(|v| v.storage).count();
    if !spec.versions.is_empty() && storage != 1 {
        found.push(cause(
            "spec.versions",
            format!(
                "Invalid value: {:?}: must have exactly one version marked as storage version",
                crd_versions(crd)
            ),
        ));
    }
    for (i, version) in spec.versions.iter().enumerate() {
        if version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .is_none()
        {
            found.push(cause(
                &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "Required value: schemas are required".into(),
            ));
        }
    }
    found
}

fn crd_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.spec.versions.iter().map(|v| v.name.clone()).collect()
}

/// Checks a CRD body as the apiextensions server validates it.
///
/// # Errors
/// 422 Invalid with every problem found; 400 when it does not decode as a CRD.
pub fn validate(object: &Value) -> Result<CustomResourceDefinition, ApiError> {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let crd: CustomResourceDefinition = serde_json::from_value(object.clone()).map_err(|e| {
        ApiError::BadRequest(format!(
            "CustomResourceDefinition in version \"v1\" cannot be handled as a CustomResourceDefinition: {e}"
        ))
    })?;
    let causes = problems(&name, &crd);
    if causes.is_empty() {
        Ok(crd)
    } else {
        Err(ApiError::InvalidFields {
            kind: QUALIFIED_KIND.into(),
            name,
            causes,
        })
    }
}

fn printer_columns(version: &CustomResourceDefinitionVersion) -> Vec<PrinterColumn> {
    let columns = version
        .additional_printer_columns
        .as_deref()
        .unwrap_or_default();
    if columns.is_empty() {
        // Upstream's default when a version declares none.
        return vec![PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            format: String::new(),
            description: "CreationTimestamp is a timestamp representing the server time when this object was created.".into(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        }];
    }
    columns
        .iter()
        .map(|c| PrinterColumn {
            name: c.name.clone(),
            type_: c.type_.clone(),
            format: c.format.clone().unwrap_or_default(),
            description: c.description.clone().unwrap_or_default(),
            priority: i64::from(c.priority.unwrap_or(0)),
            json_path: c.json_path.clone(),
        })
        .collect()
}

/// The resources a (valid) CRD serves: one per served version.
pub fn resources(crd: &CustomResourceDefinition) -> Vec<ResourceDef> {
    let spec = &crd.spec;
    let crd_name = crd.metadata.name.clone().unwrap_or_default();
    spec.versions
        .iter()
        .filter(|v| v.served)
        .map(|version| {
            let status = version
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some());
            let mut def = ResourceDef::new(
                &spec.group,
                &version.name,
                &spec.names.plural,
                &spec.names.kind,
                spec.scope == "Namespaced",
                status,
            );
            def.short_names = spec.names.short_names.clone().unwrap_or_default();
            def.categories = spec.names.categories.clone().unwrap_or_default();
            if let Some(singular) = spec.names.singular.as_ref().filter(|s| !s.is_empty()) {
                def.singular.clone_from(singular);
            }
            def.crd = Some(crd_name.clone());
            def.printer_columns = printer_columns(version);
            def.schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .and_then(|s| serde_json::to_value(s).ok())
                .map(Arc::new);
            def
        })
        .collect()
}

/// The status upstream's controllers give an accepted CRD. `previous` is the stored status,
/// whose condition times are kept when nothing changed (so re-establishing is a no-op write).
pub fn established_status(
    crd: &CustomResourceDefinition,
    previous: Option<&Value>,
    now: &str,
) -> Value {
    let names = &crd.spec.names;
    let list_kind = names
        .list_kind
        .clone()
        .unwrap_or_else(|| format!("{}List", names.kind));
    let singular = names
        .singular
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| names.kind.to_lowercase());
    let mut accepted = json!({
        "kind": names.kind,
        "listKind": list_kind,
        "plural": names.plural,
        "singular": singular,
    });
    if let Some(short) = names.short_names.as_ref().filter(|s| !s.is_empty()) {
        accepted["shortNames"] = json!(short);
    }
    if let Some(categories) = names.categories.as_ref().filter(|c| !c.is_empty()) {
        accepted["categories"] = json!(categories);
    }
    let time_of = |kind: &str| {
        previous
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == kind))
            .and_then(|c| c.get("lastTransitionTime"))
            .and_then(Value::as_str)
            .unwrap_or(now)
            .to_owned()
    };
    let mut stored: Vec<String> = previous
        .and_then(|s| s.get("storedVersions"))
        .and_then(Value::as_array)
        .map(|v| {
            v.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for version in crd.spec.versions.iter().filter(|v| v.storage) {
        if !stored.contains(&version.name) {
            stored.push(version.name.clone());
        }
    }
    json!({
        "acceptedNames": accepted,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": time_of("NamesAccepted")},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": time_of("Established")},
        ],
        "storedVersions": stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, storage: &[bool]) -> Value {
        let versions: Vec<Value> = storage
            .iter()
            .enumerate()
            .map(|(i, s)| json!({
                "name": format!("v{}", i + 1), "served": true, "storage": s,
                "schema": {"openAPIV3Schema": {"type": "object"}},
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Max", "type": "integer", "jsonPath": ".spec.maxSize"}]
            }))
            .collect();
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": "x.io", "scope": "Cluster",
                     "names": {"plural": "things", "kind": "Thing", "shortNames": ["th"]},
                     "versions": versions}
        })
    }

    #[test]
    fn a_valid_crd_serves_each_version_with_its_columns_and_names() {
        let parsed = validate(&crd("things.x.io", &[true, false])).expect("valid");
        let defs = resources(&parsed);
        assert_eq!(defs.len(), 2);
        assert_eq!(defs[0].version, "v1");
        assert!(defs[0].status_subresource);
        assert_eq!(defs[0].short_names, vec!["th"]);
        assert_eq!(defs[0].singular, "thing");
        assert_eq!(defs[0].printer_columns[0].json_path, ".spec.maxSize");
        assert_eq!(defs[0].crd.as_deref(), Some("things.x.io"));
        let status = established_status(&parsed, None, "2026-01-01T00:00:00Z");
        assert_eq!(status["acceptedNames"]["listKind"], "ThingList");
        assert_eq!(status["conditions"][1]["type"], "Established");
        assert_eq!(status["storedVersions"], json!(["v1"]));
        let again = established_status(&parsed, Some(&status), "2027-01-01T00:00:00Z");
        assert_eq!(again, status, "no change, same times");
    }

    #[test]
    fn naming_and_storage_rules_are_enforced_with_every_problem_named() {
        let err = validate(&crd("widgets.x.io", &[true, true])).expect_err("invalid");
        let status = err.to_status();
        assert_eq!(status["code"], 422);
        let fields: Vec<&str> = status["details"]["causes"]
            .as_array()
            .expect("causes")
            .iter()
            .filter_map(|c| c["field"].as_str())
            .collect();
        assert_eq!(fields, vec!["metadata.name", "spec.versions"]);
        assert!(
            status["message"].as_str().expect("message").starts_with(
                "CustomResourceDefinition.apiextensions.k8s.io \"widgets.x.io\" is invalid: ["
            ),
            "{status}"
        );
    }
}
