//! Reads Kubernetes objects from YAML or JSON text: multi-document YAML,
//! `kind: List` (what `kubectl get -A -o yaml` prints) and single objects.
//!
//! Parsing is pure: callers hand in text and a source name, so the simulator
//! never touches the file system. Raw files lack what the API server would have
//! defaulted, so [`crate::defaults`] is applied to every typed object.

use std::collections::{BTreeMap, BTreeSet};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::defaults;
use crate::objects::{ClusterObjects, ExtraObject, ObjectRef, Origin};

mod direct;
#[cfg(test)]
mod fixtures;
mod identities;
mod parallel;
mod pieces;
mod scan;
mod stream;

pub use pieces::Pieces;

/// A document that could not be turned into an object, with everything needed
/// to find and fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}{object}{field}: {message}", object = object_suffix(.object), field = field_suffix(.field))]
pub struct LoadError {
    /// File and document index.
    pub origin: Origin,
    /// `Kind namespace/name` when known.
    pub object: Option<String>,
    /// JSON path of the offending field, when known (`spec.devices[0].name`).
    pub field: Option<String>,
    /// What was wrong.
    pub message: String,
}

fn object_suffix(object: &Option<String>) -> String {
    object
        .as_ref()
        .map(|o| format!(" ({o})"))
        .unwrap_or_default()
}

fn field_suffix(field: &Option<String>) -> String {
    field
        .as_ref()
        .filter(|f| !f.is_empty() && f.as_str() != ".")
        .map(|f| format!(": field {f}"))
        .unwrap_or_default()
}

/// The result of loading: the objects, and a count of documents skipped per
/// unknown `apiVersion/kind`.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The typed objects.
    pub objects: ClusterObjects,
    /// `apiVersion kind` → number of objects skipped because nothing reads them.
    pub skipped: BTreeMap<String, usize>,
    /// Objects given more than once (same kind, namespace and name), as
    /// `Kind namespace/name`; only the first copy was kept.
    pub duplicates: BTreeSet<String>,
}

impl Loaded {
    /// A one-line note on what was skipped, or `None` when nothing was.
    #[must_use]
    pub fn skipped_note(&self) -> Option<String> {
        if self.skipped.is_empty() {
            return None;
        }
        let total: usize = self.skipped.values().sum();
        let kinds: Vec<String> = self
            .skipped
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        Some(format!(
            "skipped {total} object(s) of kinds the simulator does not read: {}",
            kinds.join(", ")
        ))
    }

    /// A one-line note on duplicate objects, or `None` when there were none.
    /// At most ten are named.
    #[must_use]
    pub fn duplicates_note(&self) -> Option<String> {
        if self.duplicates.is_empty() {
            return None;
        }
        const NAMED: usize = 10;
        let named: Vec<&str> = self
            .duplicates
            .iter()
            .take(NAMED)
            .map(String::as_str)
            .collect();
        let more = self.duplicates.len().saturating_sub(NAMED);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        Some(format!(
            "{} object(s) appear more than once in the input (same kind, namespace and name); the first copy of each is kept: {}{more}",
            self.duplicates.len(),
            named.join(", ")
        ))
    }
}

/// The kinds the loader types, by API group.
const TYPED_KINDS: [(&str, &str); 8] = [
    ("", "Node"),
    ("", "Pod"),
    ("", "Namespace"),
    ("resource.k8s.io", "DeviceClass"),
    ("resource.k8s.io", "ResourceSlice"),
    ("resource.k8s.io", "ResourceClaim"),
    ("resource.k8s.io", "ResourceClaimTemplate"),
    ("resource.k8s.io", "DeviceTaintRule"),
];

/// Kinds whose objects live in a namespace (`default` when unset).
const NAMESPACED_KINDS: [&str; 3] = ["Pod", "ResourceClaim", "ResourceClaimTemplate"];

/// Whether `kind` (with `items` present or not) makes a document a list.
fn is_list_kind(kind: &str, has_items: bool) -> bool {
    kind == "List" || kind.ends_with("List") && has_items
}

/// Accumulates objects from any number of sources.
#[derive(Debug, Default)]
pub struct Loader {
    keep: BTreeSet<(String, String)>,
    /// Drop what nothing reads of typed objects ([`crate::trim`]).
    trim: bool,
    /// Threads to type a large `kind: List`'s items on (0 and 1: the caller's alone).
    threads: usize,
    /// (group, kind, namespace, name) of every object read so far.
    seen: identities::Identities,
    loaded: Loaded,
}

impl Loader {
    /// A loader that types the simulator's own kinds and skips everything else.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Also keeps objects of `kind` in API group `group` (`""` for core),
    /// whatever their version, as [`ExtraObject`]s.
    pub fn keep_kind(&mut self, group: &str, kind: &str) -> &mut Self {
        self.keep.insert((group.to_string(), kind.to_string()));
        self
    }

    /// Drops, from every typed object it loads, what neither the fit logic, the planner,
    /// the scale-down analysis nor the controller reads ([`crate::trim`]): callers that
    /// hold large snapshots save most of their memory.
    pub fn trim_unread(&mut self) -> &mut Self {
        self.trim = true;
        self
    }

    /// Types the items of a large JSON `kind: List` on `threads` threads, the caller's
    /// and `threads - 1` scoped helpers, recording them in the list's order: the same
    /// objects, order and errors as on one thread. Pure CPU work; the caller, which may
    /// know how many cores it has, chooses. The default is 1 (no helper).
    pub fn type_on_threads(&mut self, threads: usize) -> &mut Self {
        self.threads = threads;
        self
    }

    /// Adds every object in a YAML text (one or more documents).
    ///
    /// # Errors
    /// The first document that is not valid YAML or not a valid object.
    pub fn add_yaml(&mut self, source: &str, text: &str) -> Result<(), LoadError> {
        let documents = parse_yaml(source, text)?;
        for (index, document) in documents.into_iter().enumerate() {
            self.add_value(
                Origin {
                    source: source.to_string(),
                    document: index,
                    item: None,
                },
                document,
            )?;
        }
        Ok(())
    }

    /// Adds every object in a JSON text (one value; a `kind: List` is expanded).
    ///
    /// # Errors
    /// The text is not JSON, or the value is not a valid object.
    pub fn add_json(&mut self, source: &str, text: &str) -> Result<(), LoadError> {
        let origin = Origin {
            source: source.to_string(),
            document: 0,
            item: None,
        };
        if text.trim().is_empty() {
            // An empty file holds no objects, as an empty YAML file does.
            return Ok(());
        }
        if let Some(items) = stream::list_items(text) {
            self.reserve_for(&items);
            return stream::add_items(self, &origin, &items, 0);
        }
        let value: Value = serde_json::from_str(text).map_err(|e| LoadError {
            origin: origin.clone(),
            object: None,
            field: None,
            message: format!("not valid JSON: {e}"),
        })?;
        self.add_value(origin, value)
    }

    /// Adds one already parsed document.
    ///
    /// # Errors
    /// The value is not a valid object of its kind.
    pub fn add_value(&mut self, origin: Origin, value: Value) -> Result<(), LoadError> {
        if value.is_null() {
            // An empty document, e.g. a trailing `---`.
            return Ok(());
        }
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if is_list_kind(&kind, value.get("items").is_some()) {
            let Value::Object(mut map) = value else {
                return Ok(());
            };
            let items = match map.remove("items") {
                Some(Value::Array(items)) => items,
                Some(Value::Null) | None => Vec::new(),
                Some(_) => {
                    return Err(LoadError {
                        origin,
                        object: Some(kind),
                        field: Some("items".into()),
                        message: "expected a list of objects".into(),
                    });
                }
            };
            for (i, item) in items.into_iter().enumerate() {
                self.add_item(&origin, i, item)?;
            }
            return Ok(());
        }
        self.add_object(origin, value)
    }

    /// Adds the `i`th item of a list read from `origin`.
    fn add_item(&mut self, origin: &Origin, i: usize, item: Value) -> Result<(), LoadError> {
        let item_origin = Origin {
            item: Some(i),
            ..origin.clone()
        };
        self.add_object(item_origin, item)
    }

    /// Finishes loading.
    #[must_use]
    pub fn finish(self) -> Loaded {
        self.loaded
    }

    /// Records an object's identity; when the same object was read before,
    /// returns it as `Kind namespace/name`. Objects without a name are left
    /// for validation to refuse.
    fn seen_before(&mut self, group: &str, kind: &str, value: &Value) -> Option<String> {
        let name = value.pointer("/metadata/name").and_then(Value::as_str)?;
        let namespace = value.pointer("/metadata/namespace").and_then(Value::as_str);
        self.seen_name(group, kind, namespace, name)
    }

    /// [`Self::seen_before`] of an object named `name` in `namespace` as written.
    fn seen_name(
        &mut self,
        group: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<String> {
        let namespace =
            namespace
                .filter(|ns| !ns.is_empty())
                .unwrap_or(if NAMESPACED_KINDS.contains(&kind) {
                    "default"
                } else {
                    ""
                });
        let fresh = self.seen.insert(group, kind, namespace, name);
        (!fresh).then(|| {
            if namespace.is_empty() {
                format!("{kind} {name}")
            } else {
                format!("{kind} {namespace}/{name}")
            }
        })
    }

    fn add_object(&mut self, origin: Origin, mut value: Value) -> Result<(), LoadError> {
        if self.trim
            && let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut)
        {
            // Of every kind, typed or kept: see `crate::trim::meta`.
            metadata.remove("managedFields");
        }
        if !value.is_object() {
            return Err(LoadError {
                origin,
                object: None,
                field: None,
                message: format!(
                    "expected a Kubernetes object (a mapping), found {}",
                    type_name(&value)
                ),
            });
        }
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let label = object_label(&kind, &value);
        if kind.is_empty() || api_version.is_empty() {
            return Err(LoadError {
                origin,
                object: label,
                field: Some(
                    if kind.is_empty() {
                        "kind"
                    } else {
                        "apiVersion"
                    }
                    .into(),
                ),
                message: "missing; every object needs apiVersion and kind".into(),
            });
        }
        let parsed = crate::api_version::ApiGroupVersion::parse(&api_version);
        let (group, version) = (parsed.group().to_string(), parsed.version().to_string());
        let read = TYPED_KINDS.contains(&(group.as_str(), kind.as_str()))
            || self.keep.contains(&(group.clone(), kind.clone()));
        if read && let Some(duplicate) = self.seen_before(&group, &kind, &value) {
            self.loaded.duplicates.insert(duplicate);
            return Ok(());
        }
        let objects = &mut self.loaded.objects;
        match (group.as_str(), kind.as_str()) {
            ("", "Node") => {
                let mut node: k8s_openapi::api::core::v1::Node =
                    typed(&origin, &label, value, &version, "v1", defaults::node)?;
                if self.trim {
                    crate::trim::node(&mut node);
                }
                objects.nodes.push(node);
            }
            ("", "Pod") => {
                let workload_ref = value.pointer("/spec/workloadRef").cloned();
                let mut pod: k8s_openapi::api::core::v1::Pod =
                    typed(&origin, &label, value, &version, "v1", defaults::pod)?;
                if self.trim {
                    crate::trim::pod(&mut pod);
                }
                if let Some(workload_ref) = workload_ref {
                    let key = (
                        pod.metadata.namespace.clone().unwrap_or_default(),
                        pod.metadata.name.clone().unwrap_or_default(),
                    );
                    objects.pod_workload_refs.insert(key, workload_ref);
                }
                objects.pods.push(pod);
            }
            ("", "Namespace") => objects.namespaces.push(typed(
                &origin,
                &label,
                value,
                &version,
                "v1",
                defaults::namespace,
            )?),
            ("resource.k8s.io", "DeviceClass") => objects.device_classes.push(typed(
                &origin,
                &label,
                value,
                &version,
                "v1",
                defaults::device_class,
            )?),
            ("resource.k8s.io", "ResourceSlice") => objects.resource_slices.push(typed(
                &origin,
                &label,
                value,
                &version,
                "v1",
                defaults::resource_slice,
            )?),
            ("resource.k8s.io", "ResourceClaim") => objects.resource_claims.push(typed(
                &origin,
                &label,
                value,
                &version,
                "v1",
                defaults::resource_claim,
            )?),
            ("resource.k8s.io", "ResourceClaimTemplate") => {
                objects.resource_claim_templates.push(typed(
                    &origin,
                    &label,
                    value,
                    &version,
                    "v1",
                    defaults::resource_claim_template,
                )?)
            }
            ("resource.k8s.io", "DeviceTaintRule") => objects.device_taint_rules.push(typed(
                &origin,
                &label,
                value,
                &version,
                "v1",
                defaults::device_taint_rule,
            )?),
            _ if self.keep.contains(&(group.clone(), kind.clone())) => {
                objects.extra.push(ExtraObject {
                    api_version,
                    kind,
                    origin,
                    value,
                })
            }
            _ => {
                *self
                    .loaded
                    .skipped
                    .entry(format!("{api_version} {kind}"))
                    .or_default() += 1
            }
        }
        Ok(())
    }
}

/// The YAML parser's resource limits for a text of `len` bytes.
///
/// Without aliases, a YAML node takes at least two bytes of text, so limits
/// proportional to the text never refuse a real file (a 10,000-pod
/// `kubectl get -o yaml` is ~50 MB and ~2 million nodes), while alias
/// replay — the one way a small text can grow without bound — stays capped
/// near the text's own size: an alias bomb is still refused.
#[must_use]
pub fn yaml_limits(len: usize) -> serde_saphyr::Budget {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_events = budget.max_events.max(len.saturating_mul(2));
    budget.max_nodes = budget.max_nodes.max(len);
    budget.max_documents = budget.max_documents.max(len / 8);
    budget.max_total_scalar_bytes = budget.max_total_scalar_bytes.max(len);
    budget
}

/// Most events alias replay may add for a text of `len` bytes.
fn alias_replay_limit(len: usize) -> usize {
    1_000_000usize.max(len)
}

/// Parses every document of a YAML text within [`yaml_limits`].
fn parse_yaml(source: &str, text: &str) -> Result<Vec<Value>, LoadError> {
    use std::cell::Cell;
    use std::rc::Rc;

    // Which document the parser was in when it stopped.
    let documents_seen = Rc::new(Cell::new(0usize));
    let seen = Rc::clone(&documents_seen);
    let budget = yaml_limits(text.len());
    let limits = budget.clone();
    // YAML 1.2 booleans only: kubectl always prints true/false, and a
    // hand-written attribute value such as `Y` or `on` stays a string.
    let options = serde_saphyr::options! {
        strict_booleans: true,
        budget: Some(budget),
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: alias_replay_limit(text.len()),
        },
    }
    .with_budget_report(move |report| seen.set(report.documents));
    serde_saphyr::from_multiple_with_options(text, options).map_err(|e| {
        let document = documents_seen.get().saturating_sub(1);
        let location = e
            .location()
            .filter(|l| l.line() > 0)
            .map(|l| format!(" (line {}, column {})", l.line(), l.column()))
            .unwrap_or_default();
        let message = match limit_hit(&e, &limits, text.len()) {
            Some(limit) => format!(
                "YAML limit hit{location}: {limit}. Limits grow with the file's size ({} bytes), so this only happens when YAML aliases (*name) expand far beyond the text or collections nest very deep; export the objects again with `kubectl get -o yaml` (which writes no aliases) or `-o json`",
                text.len()
            ),
            None => format!("not valid YAML{location}: {e}"),
        };
        LoadError {
            origin: Origin {
                source: source.to_string(),
                document,
                item: None,
            },
            object: None,
            field: None,
            message,
        }
    })
}

/// Which of [`yaml_limits`] an error reports, in words; `None` for other errors.
fn limit_hit(
    error: &serde_saphyr::Error,
    limits: &serde_saphyr::Budget,
    len: usize,
) -> Option<String> {
    use serde_saphyr::budget::BudgetBreach;
    let mut error = error;
    while let serde_saphyr::Error::AliasError { error: inner, .. }
    | serde_saphyr::Error::WithSnippet { error: inner, .. } = error
    {
        error = inner;
    }
    match error {
        serde_saphyr::Error::Budget { breach, .. } => Some(match breach {
            BudgetBreach::Events { .. } => format!("more than {} parser events", limits.max_events),
            BudgetBreach::Nodes { .. } => format!("more than {} YAML nodes", limits.max_nodes),
            BudgetBreach::Documents { .. } => {
                format!("more than {} documents", limits.max_documents)
            }
            BudgetBreach::Depth { .. } => {
                format!("collections nested more than {} deep", limits.max_depth)
            }
            BudgetBreach::Aliases { .. } => format!("more than {} aliases", limits.max_aliases),
            BudgetBreach::Anchors { .. } => format!("more than {} anchors", limits.max_anchors),
            BudgetBreach::AliasAnchorRatio { .. } => {
                "far more aliases than anchors (an alias bomb)".to_string()
            }
            BudgetBreach::RecordedAnchorEvents { .. }
            | BudgetBreach::RecordedAnchorBytes { .. } => {
                "anchors retained for aliases grew past the limit".to_string()
            }
            BudgetBreach::ScalarBytes { .. } => format!(
                "more than {} bytes of scalar text",
                limits.max_total_scalar_bytes
            ),
            other => format!("{other:?}"),
        }),
        serde_saphyr::Error::AliasReplayLimitExceeded { .. } => Some(format!(
            "aliases expand to more than {} events",
            alias_replay_limit(len)
        )),
        _ => None,
    }
}

/// Converts a JSON value into a typed object, with the field path of any error,
/// then applies the API server's defaults and the checks they rely on.
fn typed<T: DeserializeOwned>(
    origin: &Origin,
    label: &Option<String>,
    value: Value,
    version: &str,
    expected_version: &str,
    apply_defaults: fn(&mut T) -> Result<(), defaults::FieldError>,
) -> Result<T, LoadError> {
    let error = |field: Option<String>, message: String| LoadError {
        origin: origin.clone(),
        object: label.clone(),
        field,
        message,
    };
    if version != expected_version {
        return Err(error(
            Some("apiVersion".into()),
            format!(
                "version {version} is not read; export the {expected_version} version (e.g. kubectl get <resource>.{expected_version}.<group> -o yaml)"
            ),
        ));
    }
    let mut object: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        error(Some(path), e.into_inner().to_string())
    })?;
    apply_defaults(&mut object).map_err(|e| error(Some(e.field), e.message))?;
    Ok(object)
}

fn object_label(kind: &str, value: &Value) -> Option<String> {
    let metadata = value.get("metadata")?;
    let name = metadata.get("name").and_then(Value::as_str)?;
    let kind = if kind.is_empty() { "object" } else { kind };
    Some(match metadata.get("namespace").and_then(Value::as_str) {
        Some(ns) => format!("{kind} {}", ObjectRef::new(ns, name)),
        None => format!("{kind} {name}"),
    })
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests;
