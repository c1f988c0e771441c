//! The verbs of a resource request: reads (with resourceVersion semantics and Table output),
//! watches, and writes (with admission: schema defaults, pruning and validation, field
//! validation, and the CustomResourceDefinition lifecycle).

use std::sync::Arc;
use std::time::Duration;

use axum::{
    body::Body,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::{
    convert, crd,
    error::{ApiError, Cause},
    faults::Verb,
    kubectl::{self, TableRequest},
    lock,
    object::{Target, meta_str},
    openapi,
    patch::PatchType,
    request::{App, Params, ResourcePath, json_response},
    resource::ResourceDef,
    schema,
    store::{DeleteOptions, WatchFrom},
    watch::{self, WatchRequest},
};

/// A watch without `timeoutSeconds` ends after this long (upstream picks 30–60 min).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// How a response body is shaped, from the `Accept` header and query.
#[derive(Clone, Copy, Debug)]
struct Shape {
    metadata_only: bool,
    table: Option<TableRequest>,
}

impl Shape {
    fn of(headers: &HeaderMap, params: &Params) -> Self {
        let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
        Self {
            metadata_only: accept.is_some_and(|a| a.contains("as=PartialObjectMetadata")),
            table: kubectl::table_request(accept, params.get("includeObject")),
        }
    }

    fn object(self, def: &ResourceDef, code: u16, object: &Value) -> Response {
        if let Some(include) = self.table {
            let t = kubectl::table(
                def,
                std::slice::from_ref(object),
                None,
                include,
                true,
                now(),
            );
            return json_response(code, &t);
        }
        if self.metadata_only {
            json_response(code, &crate::object::partial_metadata(object))
        } else {
            json_response(code, object)
        }
    }

    fn list(self, def: &ResourceDef, items: Vec<Value>, rv: u64) -> Response {
        if let Some(include) = self.table {
            return json_response(
                200,
                &kubectl::table(def, &items, Some(rv), include, true, now()),
            );
        }
        if self.metadata_only {
            return json_response(
                200,
                &json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": {"resourceVersion": rv.to_string()},
                    "items": items.iter().map(crate::object::partial_metadata).collect::<Vec<_>>(),
                }),
            );
        }
        json_response(
            200,
            &json!({
                "kind": format!("{}List", def.kind),
                "apiVersion": def.api_version(),
                "metadata": {"resourceVersion": rv.to_string()},
                "items": items,
            }),
        )
    }
}

fn now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

fn decode(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("unable to decode request body as JSON: {e}")))
}

fn parse_rv(rv: &str) -> Result<u64, ApiError> {
    rv.parse().map_err(|_| {
        ApiError::BadRequest(format!(
            "invalid resourceVersion {rv:?}: expected an integer"
        ))
    })
}

/// Waits (up to the server's wait, 3 s upstream) until the store reaches resourceVersion `rv`;
/// then the read may be served. Upstream's watch cache answers a read of a resourceVersion it
/// has not reached with 504 `Too large resource version` after that wait.
async fn wait_for_rv(app: &App, rv: u64) -> Result<(), ApiError> {
    let mut latest = lock(&app.store).latest();
    let reached = tokio::time::timeout(
        app.too_large_wait,
        latest.wait_for(|current| *current >= rv),
    )
    .await;
    match reached {
        Ok(Ok(_)) => Ok(()),
        _ => Err(ApiError::TooLargeResourceVersion {
            requested: rv,
            current: lock(&app.store).current_rv(),
            retry_after: 1,
        }),
    }
}

/// The resourceVersion semantics of a GET or LIST: `""` and `"0"` serve the latest state;
/// `NotOlderThan` (the default) waits for a larger resourceVersion; `Exact` serves only the
/// latest one (older ones count as compacted here: no MVCC history is kept).
async fn check_read_rv(app: &App, params: &Params) -> Result<(), ApiError> {
    let Some(rv) = params
        .get("resourceVersion")
        .filter(|v| !v.is_empty() && *v != "0")
    else {
        return Ok(());
    };
    let rv = parse_rv(rv)?;
    match params.get("resourceVersionMatch").unwrap_or_default() {
        "" | "NotOlderThan" => wait_for_rv(app, rv).await,
        "Exact" => {
            let current = lock(&app.store).current_rv();
            if rv > current {
                Err(ApiError::TooLargeResourceVersion {
                    requested: rv,
                    current,
                    retry_after: 0,
                })
            } else if rv < current {
                Err(ApiError::Expired(format!(
                    "too old resource version: {rv} ({current})"
                )))
            } else {
                Ok(())
            }
        }
        other => Err(ApiError::BadRequest(format!(
            "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
        ))),
    }
}

async fn watch_response(
    app: &Arc<App>,
    path: &ResourcePath,
    params: &Params,
    shape: Shape,
) -> Result<Response, ApiError> {
    let selectors = params.selectors()?;
    let send_initial = params.flag("sendInitialEvents");
    let rv = params.get("resourceVersion").filter(|v| !v.is_empty());
    let from = match (rv, send_initial) {
        (_, Some(true)) => WatchFrom::Now { initial: true },
        (None | Some("0"), Some(false)) => WatchFrom::Now { initial: false },
        (None | Some("0"), None) => WatchFrom::Now { initial: true },
        (Some(rv), _) => WatchFrom::After(parse_rv(rv)?),
    };
    let timeout = match params.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(t.parse().map_err(|_| {
            ApiError::BadRequest(format!("invalid timeoutSeconds {t:?}: expected an integer"))
        })?),
        None => DEFAULT_WATCH_TIMEOUT,
    };
    let request = WatchRequest {
        def: path.def.clone(),
        namespace: path.namespace.clone(),
        selectors,
        bookmarks: params.flag("allowWatchBookmarks") == Some(true),
        initial_events_end: send_initial == Some(true),
        metadata_only: shape.metadata_only,
        table: shape.table,
        timeout,
        bookmark_interval: app.bookmark_interval,
    };
    // A streaming list must start from a state at least as new as asked for: upstream waits,
    // then answers in the stream with the 504 (a plain watch from a future resourceVersion is
    // accepted and simply waits for events, as upstream's cacher does).
    let too_large = match (send_initial, rv) {
        (Some(true), Some(rv)) if rv != "0" => wait_for_rv(app, parse_rv(rv)?).await.err(),
        _ => None,
    };
    let opened = match too_large {
        Some(err) => Err(err),
        None => lock(&app.store).open_watch(&path.def, path.namespace.as_deref(), from),
    };
    let body = match opened {
        Ok(start) => Body::from_stream(watch::spawn(Arc::clone(&app.store), request, start)),
        Err(err @ (ApiError::Expired(_) | ApiError::TooLargeResourceVersion { .. })) => {
            Body::from_stream(watch::error_stream(&err))
        }
        Err(other) => return Err(other),
    };
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// `fieldValidation` of a write (upstream default: `Warn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    fn from_params(params: &Params) -> Result<Self, ApiError> {
        match params.get("fieldValidation").unwrap_or_default() {
            "" | "Warn" => Ok(Self::Warn),
            "Ignore" => Ok(Self::Ignore),
            "Strict" => Ok(Self::Strict),
            other => Err(ApiError::BadRequest(format!(
                "fieldValidation: Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

fn qualified_kind(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        def.kind.clone()
    } else {
        format!("{}.{}", def.kind, def.group)
    }
}

/// kube-apiserver's `TaintNodesByCondition` admission (on by default): every Node is
/// created with `node.kubernetes.io/not-ready:NoSchedule`, which the node lifecycle
/// controller lifts once the node is Ready (here the scheduler stand-in plays that part).
/// Without it a client would see a freshly registered Node as schedulable at once, which
/// no real cluster shows.
fn taint_new_node_not_ready(node: &mut Value) {
    const KEY: &str = "node.kubernetes.io/not-ready";
    let Some(object) = node.as_object_mut() else {
        return;
    };
    let spec = object
        .entry("spec")
        .or_insert_with(|| serde_json::json!({}));
    let Some(spec) = spec.as_object_mut() else {
        return;
    };
    let taints = spec
        .entry("taints")
        .or_insert_with(|| serde_json::json!([]));
    let Some(taints) = taints.as_array_mut() else {
        return;
    };
    let present = taints.iter().any(|t| {
        t.get("key").and_then(Value::as_str) == Some(KEY)
            && t.get("effect").and_then(Value::as_str) == Some("NoSchedule")
    });
    if !present {
        taints.push(serde_json::json!({"key": KEY, "effect": "NoSchedule"}));
    }
}

/// The admission of one write: CRD rules, schema defaults/pruning/validation of custom
/// resources, unknown fields reported per `fieldValidation`. Unknown fields the stored object
/// already had are not the request's (built-in kinds are not pruned here).
fn admission(
    view: &ResourceDef,
    validation: FieldValidation,
    taint_new_nodes: bool,
    warnings: &mut Vec<String>,
) -> impl FnMut(&mut Value, Option<&Value>) -> Result<(), ApiError> {
    let schema = openapi::schema_of(view);
    let meta = openapi::object_meta_schema();
    move |candidate: &mut Value, old: Option<&Value>| {
        if view.group == "apiextensions.k8s.io" && view.kind == "CustomResourceDefinition" {
            crd::validate(candidate)?;
        }
        if taint_new_nodes && old.is_none() && view.group.is_empty() && view.kind == "Node" {
            taint_new_node_not_ready(candidate);
        }
        let Some((schema, definitions)) = &schema else {
            return Ok(());
        };
        let custom = view.crd.is_some();
        let mut as_served = convert::to_view(view.conversion, candidate.clone());
        let checked = schema::check(
            schema,
            Some(&meta),
            definitions,
            &mut as_served,
            custom,
            custom,
        );
        if !checked.errors.is_empty() {
            return Err(ApiError::InvalidFields {
                kind: qualified_kind(view),
                name: meta_str(candidate, "name").unwrap_or_default().to_owned(),
                causes: checked
                    .errors
                    .into_iter()
                    .map(|e| Cause {
                        field: e.field,
                        detail: e.detail,
                    })
                    .collect(),
            });
        }
        let mut unknown = checked.unknown;
        if !custom && let Some(old) = old {
            let mut old = convert::to_view(view.conversion, old.clone());
            let before = schema::check(schema, Some(&meta), definitions, &mut old, false, false);
            unknown.retain(|f| !before.unknown.contains(f));
        }
        if custom {
            *candidate = convert::to_stored(view.conversion, as_served);
        }
        match validation {
            FieldValidation::Strict if !unknown.is_empty() => Err(ApiError::StrictDecoding {
                kind: view.kind.clone(),
                version: view.version.clone(),
                unknown,
            }),
            FieldValidation::Warn => {
                warnings.extend(
                    unknown
                        .into_iter()
                        .map(|f| format!("unknown field \"{f}\"")),
                );
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let text = format!("299 - {}", serde_json::Value::from(warning.as_str()));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

/// Registers what a stored CRD serves and reports it established; unregisters (and deletes
/// the custom resources of) a deleted one.
fn sync_crd(app: &App, object: &Value, gone: bool) {
    let name = meta_str(object, "name").unwrap_or_default().to_owned();
    if gone {
        let removed = crate::write_lock(&app.registry).remove_crd(&name);
        let mut store = lock(&app.store);
        for def in &removed {
            if let Err(err) = store.delete_collection(def, None, &Default::default(), false) {
                tracing::warn!(crd = %name, %err, "unable to delete the custom resources of a deleted CRD");
            }
        }
        tracing::info!(crd = %name, "CustomResourceDefinition removed");
        return;
    }
    let Ok(parsed) = crd::validate(object) else {
        return;
    };
    {
        let mut registry = crate::write_lock(&app.registry);
        registry.remove_crd(&name);
        for def in crd::resources(&parsed) {
            registry.insert(def);
        }
    }
    let Some(crd_def) = crate::read_lock(&app.registry)
        .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .cloned()
    else {
        return;
    };
    let status =
        crd::established_status(&parsed, object.get("status"), &crate::store::now_rfc3339());
    let mut body = object.clone();
    body["status"] = status;
    match lock(&app.store).update(&crd_def, Target::Status, None, &name, body, false) {
        Ok(_) => tracing::info!(crd = %name, "CustomResourceDefinition established"),
        Err(err) => tracing::warn!(crd = %name, %err, "unable to write the CRD's status"),
    }
}

fn is_crd(def: &ResourceDef) -> bool {
    def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions"
}

/// The definition objects of `view` are stored under (itself unless it shares storage).
fn storage_def(app: &App, view: &ResourceDef) -> ResourceDef {
    match &view.stored_as {
        Some(key) => crate::read_lock(&app.registry)
            .get(&key.group, &key.version, &key.plural)
            .cloned()
            .unwrap_or_else(|| view.clone()),
        None => view.clone(),
    }
}

/// Executes a resource request; returns the response for the verb.
pub async fn serve_resource(
    app: &Arc<App>,
    path: &ResourcePath,
    verb: Verb,
    params: &Params,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let shape = Shape::of(headers, params);
    let view = &path.def;
    let stored = storage_def(app, view);
    let conversion = view.conversion;
    let out = |v: Value| convert::to_view(conversion, v);
    let ns = path.namespace.as_deref();
    let name = path.name.as_deref().unwrap_or_default();
    let target = if path.sub.as_deref() == Some("status") {
        Target::Status
    } else {
        Target::Main
    };
    let dry_run = params.dry_run();
    let mut warnings = Vec::new();
    let response = match verb {
        Verb::Watch => return watch_response(app, path, params, shape).await,
        Verb::List => {
            check_read_rv(app, params).await?;
            let selectors = params.selectors()?;
            let (items, rv) = lock(&app.store).list(view, ns, &selectors);
            shape.list(view, items, rv)
        }
        Verb::Get => {
            check_read_rv(app, params).await?;
            let object = lock(&app.store).get(&stored, ns, name)?;
            shape.object(view, 200, &out(object))
        }
        Verb::Create if path.sub.as_deref() == Some("binding") => {
            let binding = decode(body)?;
            let status = lock(&app.store).bind(view, ns, name, &binding, dry_run)?;
            json_response(201, &status)
        }
        Verb::Create if path.sub.as_deref() == Some("eviction") => {
            // The registry first, then the store: the order every other path takes.
            let registry = crate::read_lock(&app.registry);
            let answer = crate::eviction::evict(
                &mut lock(&app.store),
                &registry,
                view,
                ns.unwrap_or_default(),
                name,
                &decode(body)?,
                dry_run,
            )?;
            let mut response = json_response(answer.code, &answer.body);
            if let Some(seconds) = answer.retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, seconds.into());
            }
            response
        }
        Verb::Create => {
            let validation = FieldValidation::from_params(params)?;
            let mut admit = admission(view, validation, app.taint_new_nodes, &mut warnings);
            let input = convert::to_stored(conversion, decode(body)?);
            let object =
                lock(&app.store).create_admitted(&stored, ns, input, dry_run, &mut admit)?;
            if is_crd(view) && !dry_run {
                sync_crd(app, &object, false);
            }
            shape.object(view, 201, &out(object))
        }
        Verb::Update => {
            let validation = FieldValidation::from_params(params)?;
            let mut admit = admission(view, validation, app.taint_new_nodes, &mut warnings);
            let input = convert::to_stored(conversion, decode(body)?);
            let object = lock(&app.store)
                .update_admitted(&stored, target, ns, name, input, dry_run, &mut admit)?;
            if is_crd(view) && !dry_run && target == Target::Main {
                sync_crd(app, &object, false);
            }
            shape.object(view, 200, &out(object))
        }
        Verb::Patch => {
            let content_type = headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            let patch_type = PatchType::from_content_type(content_type.unwrap_or_default())?;
            if patch_type == PatchType::Apply
                && params.get("fieldManager").is_none_or(str::is_empty)
            {
                return Err(ApiError::Invalid {
                    kind: "PatchOptions.meta.k8s.io".into(),
                    name: String::new(),
                    field: "fieldManager".into(),
                    detail: "Required value: is required for apply patch".into(),
                });
            }
            let validation = FieldValidation::from_params(params)?;
            let mut admit = admission(view, validation, app.taint_new_nodes, &mut warnings);
            let patch = patch_type.parse_body(body)?;
            let written = lock(&app.store).patch_admitted(
                &stored,
                target,
                ns,
                name,
                (patch_type, &patch, params.get("fieldManager")),
                dry_run,
                conversion,
                &mut admit,
            )?;
            if is_crd(view) && !dry_run && target == Target::Main {
                sync_crd(app, &written.object, false);
            }
            shape.object(
                view,
                if written.created { 201 } else { 200 },
                &out(written.object),
            )
        }
        Verb::Delete => {
            let options = parse_delete_options(body, params)?;
            let (object, gone) = lock(&app.store).delete(&stored, ns, name, &options)?;
            if is_crd(view) && gone && !options.dry_run {
                sync_crd(app, &object, true);
            }
            shape.object(view, if gone { 200 } else { 202 }, &out(object))
        }
        Verb::DeleteCollection => {
            let selectors = params.selectors()?;
            let (items, rv) = {
                let mut store = lock(&app.store);
                let items = store.delete_collection(view, ns, &selectors, dry_run)?;
                (items, store.current_rv())
            };
            shape.list(view, items.into_iter().map(out).collect(), rv)
        }
    };
    Ok(with_warnings(response, &warnings))
}

/// Re-registers the CRDs found in the store (after a restart from a state file).
pub fn register_stored_crds(app: &App) {
    let Some(crd_def) = crate::read_lock(&app.registry)
        .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .cloned()
    else {
        return;
    };
    let (crds, _) = lock(&app.store).list(&crd_def, None, &Default::default());
    for object in crds {
        sync_crd(app, &object, false);
    }
}

fn parse_delete_options(body: &[u8], params: &Params) -> Result<DeleteOptions, ApiError> {
    let opts = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        decode(body)?
    };
    let precondition = |field: &str| {
        opts.pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let dry_run_body = opts
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|list| list.iter().any(|v| v == "All"));
    Ok(DeleteOptions {
        resource_version: precondition("resourceVersion"),
        uid: precondition("uid"),
        dry_run: params.dry_run() || dry_run_body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::Conversion;

    #[test]
    fn warnings_are_quoted_as_upstream_sends_them() {
        let response = with_warnings(
            StatusCode::OK.into_response(),
            &["unknown field \"spec.x\"".to_owned()],
        );
        let value = response
            .headers()
            .get(header::WARNING)
            .and_then(|v| v.to_str().ok());
        assert_eq!(value, Some(r#"299 - "unknown field \"spec.x\"""#));
    }

    #[test]
    fn conversion_is_none_for_plain_resources() {
        let def = ResourceDef::new("", "v1", "pods", "Pod", true, true);
        assert_eq!(def.conversion, Conversion::None);
        assert_eq!(qualified_kind(&def), "Pod");
    }
}
