//! The HTTP surface: path parsing, verb mapping, fault injection, request logging,
//! and the translation of store results into responses.
//!
//! Paths are parsed by hand rather than with axum routes because the API's grammar
//! (`/api/v1/namespaces/{ns}/pods` vs `/api/v1/namespaces/{name}/status`) depends on
//! which resources are registered.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{DefaultBodyLimit, Query, State},
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use k8s_openapi::apimachinery::pkg::version::Info;
use serde_json::{Value, json};

use crate::{
    discovery,
    error::ApiError,
    faults::{Faults, RequestRecord, Verb},
    lock,
    object::Target,
    patch::PatchType,
    resource::{Registry, ResourceDef},
    selector::{FieldSelector, LabelSelector, Selectors},
    store::{DeleteOptions, Store, WatchFrom},
    watch::{self, WatchRequest},
};

/// The request body limit of the real server (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// A watch without `timeoutSeconds` ends after this long (upstream picks 30–60 min).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// Shared state of a running server.
pub(crate) struct App {
    pub registry: Registry,
    pub store: Arc<Mutex<Store>>,
    pub faults: Mutex<Faults>,
    pub log: Mutex<Vec<RequestRecord>>,
    pub version: Info,
    pub addr: SocketAddr,
    pub bookmark_interval: Duration,
}

/// The axum router serving everything.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .fallback(handle)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

/// A request for objects of one resource.
#[derive(Debug)]
struct ResourcePath {
    def: ResourceDef,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

/// What a URL path names.
#[derive(Debug)]
enum Route {
    Health,
    Version,
    CoreVersions,
    Groups,
    Group(String),
    GroupResources(String, String),
    /// Boxed: a resource's definition dwarfs the other routes.
    Resource(Box<ResourcePath>),
}

fn parse_resource(
    registry: &Registry,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Route, ApiError> {
    let namespaced_form = rest.len() >= 3
        && rest[0] == "namespaces"
        && registry
            .get(group, version, rest[2])
            .is_some_and(|d| d.namespaced);
    let (namespace, rest) = if namespaced_form {
        (Some(rest[1].to_owned()), &rest[2..])
    } else {
        (None, rest)
    };
    let def = registry
        .get(group, version, rest[0])
        .ok_or(ApiError::UnknownResource)?
        .clone();
    if rest.len() > 3 || (!def.namespaced && namespace.is_some()) {
        return Err(ApiError::UnknownResource);
    }
    let name = rest.get(1).map(|s| (*s).to_owned());
    if def.namespaced && namespace.is_none() && name.is_some() {
        return Err(ApiError::UnknownResource);
    }
    let sub = rest.get(2).map(|s| (*s).to_owned());
    if let Some(sub) = &sub
        && !def.subresources().contains(&sub.as_str())
    {
        return Err(ApiError::UnknownResource);
    }
    Ok(Route::Resource(Box::new(ResourcePath {
        def,
        namespace,
        name,
        sub,
    })))
}

fn parse_route(registry: &Registry, path: &str) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["healthz" | "livez" | "readyz"] => Ok(Route::Health),
        ["version"] => Ok(Route::Version),
        ["api"] => Ok(Route::CoreVersions),
        ["api", version] => Ok(Route::GroupResources(String::new(), (*version).to_owned())),
        ["api", version, rest @ ..] => parse_resource(registry, "", version, rest),
        ["apis"] => Ok(Route::Groups),
        ["apis", group] => Ok(Route::Group((*group).to_owned())),
        ["apis", group, version] => Ok(Route::GroupResources(
            (*group).to_owned(),
            (*version).to_owned(),
        )),
        ["apis", group, version, rest @ ..] => parse_resource(registry, group, version, rest),
        _ => Err(ApiError::UnknownResource),
    }
}

/// Query parameters, first value wins.
struct Params(Vec<(String, String)>);

impl Params {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> Option<bool> {
        self.get(key).map(|v| v == "true" || v == "1")
    }

    fn selectors(&self) -> Result<Selectors, ApiError> {
        Ok(Selectors {
            labels: LabelSelector::parse(self.get("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(self.get("fieldSelector").unwrap_or_default())?,
        })
    }

    fn dry_run(&self) -> bool {
        self.get("dryRun").is_some_and(|v| v == "All")
    }
}

fn json_response(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error_response(err: &ApiError) -> Response {
    json_response(err.code(), &err.to_status())
}

fn decode(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("unable to decode request body as JSON: {e}")))
}

fn list_object(def: &ResourceDef, items: Vec<Value>, rv: u64, metadata_only: bool) -> Value {
    if metadata_only {
        return json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items.iter().map(watch::partial_metadata).collect::<Vec<_>>(),
        });
    }
    json!({
        "kind": format!("{}List", def.kind),
        "apiVersion": def.api_version(),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    })
}

/// Whether the client asked for `PartialObjectMetadata` (kube's `*_metadata` calls and
/// `metadata_watcher`) rather than full objects.
fn wants_metadata_only(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("as=PartialObjectMetadata"))
}

/// The verb a method names on a resource path, if any.
fn verb_for(method: &Method, path: &ResourcePath, params: &Params) -> Result<Verb, ApiError> {
    let sub = path.sub.as_deref();
    let has_ns = path.namespace.is_some() || !path.def.namespaced;
    let verb = match (method.as_str(), &path.name, sub) {
        ("GET", None, None) if params.flag("watch") == Some(true) => Verb::Watch,
        ("GET", None, None) => Verb::List,
        ("GET", Some(_), None | Some("status")) => Verb::Get,
        ("POST", None, None) if has_ns => Verb::Create,
        ("POST", Some(_), Some("binding")) => Verb::Create,
        ("PUT", Some(_), None | Some("status")) => Verb::Update,
        ("PATCH", Some(_), None | Some("status")) => Verb::Patch,
        ("DELETE", Some(_), None) => Verb::Delete,
        ("DELETE", None, None) if has_ns => Verb::DeleteCollection,
        _ => return Err(ApiError::MethodNotAllowed),
    };
    Ok(verb)
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

fn watch_response(
    app: &App,
    path: &ResourcePath,
    params: &Params,
    metadata_only: bool,
) -> Result<Response, ApiError> {
    let selectors = params.selectors()?;
    let send_initial = params.flag("sendInitialEvents");
    let rv = params.get("resourceVersion").filter(|v| !v.is_empty());
    let from = match (rv, send_initial) {
        (_, Some(true)) => WatchFrom::Now { initial: true },
        (None | Some("0"), Some(false)) => WatchFrom::Now { initial: false },
        (None | Some("0"), None) => WatchFrom::Now { initial: true },
        (Some(rv), _) => WatchFrom::After(rv.parse().map_err(|_| {
            ApiError::BadRequest(format!(
                "invalid resourceVersion {rv:?}: expected an integer"
            ))
        })?),
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
        metadata_only,
        timeout,
        bookmark_interval: app.bookmark_interval,
    };
    let opened = lock(&app.store).open_watch(&path.def, path.namespace.as_deref(), from);
    let body = match opened {
        Ok(start) => Body::from_stream(watch::spawn(Arc::clone(&app.store), request, start)),
        Err(err @ ApiError::Expired(_)) => Body::from_stream(watch::error_stream(&err)),
        Err(other) => return Err(other),
    };
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// Executes a resource request; returns the response for the verb.
fn serve_resource(
    app: &App,
    method: &Method,
    path: &ResourcePath,
    params: &Params,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let header_str = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let content_type = header_str(header::CONTENT_TYPE);
    let metadata_only = wants_metadata_only(header_str(header::ACCEPT));
    let object_response = |code: u16, object: &Value| {
        if metadata_only {
            json_response(code, &watch::partial_metadata(object))
        } else {
            json_response(code, object)
        }
    };
    let def = &path.def;
    let ns = path.namespace.as_deref();
    let name = path.name.as_deref().unwrap_or_default();
    let target = if path.sub.as_deref() == Some("status") {
        Target::Status
    } else {
        Target::Main
    };
    let dry_run = params.dry_run();
    let verb = verb_for(method, path, params)?;
    match verb {
        Verb::Watch => watch_response(app, path, params, metadata_only),
        Verb::List => {
            let selectors = params.selectors()?;
            let (items, rv) = lock(&app.store).list(def, ns, &selectors);
            Ok(json_response(
                200,
                &list_object(def, items, rv, metadata_only),
            ))
        }
        Verb::Get => Ok(object_response(200, &lock(&app.store).get(def, ns, name)?)),
        Verb::Create if path.sub.as_deref() == Some("binding") => {
            let binding = decode(body)?;
            let status = lock(&app.store).bind(def, ns, name, &binding, dry_run)?;
            Ok(json_response(201, &status))
        }
        Verb::Create => {
            let object = lock(&app.store).create(def, ns, decode(body)?, dry_run)?;
            Ok(object_response(201, &object))
        }
        Verb::Update => {
            let object = lock(&app.store).update(def, target, ns, name, decode(body)?, dry_run)?;
            Ok(object_response(200, &object))
        }
        Verb::Patch => {
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
            let patch = patch_type.parse_body(body)?;
            let written =
                lock(&app.store).patch(def, target, ns, name, patch_type, &patch, dry_run)?;
            Ok(object_response(
                if written.created { 201 } else { 200 },
                &written.object,
            ))
        }
        Verb::Delete => {
            let options = parse_delete_options(body, params)?;
            let (object, gone) = lock(&app.store).delete(def, ns, name, &options)?;
            Ok(object_response(if gone { 200 } else { 202 }, &object))
        }
        Verb::DeleteCollection => {
            let selectors = params.selectors()?;
            let mut store = lock(&app.store);
            let items = store.delete_collection(def, ns, &selectors, dry_run)?;
            let rv = store.current_rv();
            Ok(json_response(
                200,
                &list_object(def, items, rv, metadata_only),
            ))
        }
    }
}

/// Serves one request and fills in what the request log records about it.
fn serve(
    app: &App,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
    record: &mut RequestRecord,
) -> Response {
    let params = match Query::<Vec<(String, String)>>::try_from_uri(uri) {
        Ok(Query(pairs)) => Params(pairs),
        Err(e) => {
            return error_response(&ApiError::BadRequest(format!("invalid query string: {e}")));
        }
    };
    let route = match parse_route(&app.registry, uri.path()) {
        Ok(route) => route,
        Err(err) => return error_response(&err),
    };
    let document = match route {
        Route::Resource(path) => {
            record.resource = Some(match &path.sub {
                Some(sub) => format!("{}/{sub}", path.def.plural),
                None => path.def.plural.clone(),
            });
            record.namespace.clone_from(&path.namespace);
            record.name.clone_from(&path.name);
            let verb = match verb_for(method, &path, &params) {
                Ok(verb) => verb,
                Err(err) => return error_response(&err),
            };
            record.verb = Some(verb);
            let injected =
                lock(&app.faults).take(verb, record.resource.as_deref().unwrap_or_default());
            if let Some(code) = injected {
                return error_response(&ApiError::injected(code));
            }
            return serve_resource(app, method, &path, &params, headers, body)
                .unwrap_or_else(|err| error_response(&err));
        }
        _ if method != Method::GET => Err(ApiError::MethodNotAllowed),
        // Plain text, as upstream answers health probes; handy for shell scripts.
        Route::Health => return (StatusCode::OK, "ok").into_response(),
        Route::Version => discovery::version(&app.version),
        listing @ (Route::CoreVersions | Route::Groups)
            if discovery::wants_aggregated(
                headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()),
            ) =>
        {
            let core = matches!(listing, Route::CoreVersions);
            return match discovery::aggregated(&app.registry, core) {
                Ok(doc) => (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, discovery::AGGREGATED_MEDIA_TYPE)],
                    doc.to_string(),
                )
                    .into_response(),
                Err(err) => error_response(&err),
            };
        }
        Route::CoreVersions => discovery::core_versions(app.addr),
        Route::Groups => discovery::group_list(&app.registry),
        Route::Group(group) => discovery::group(&app.registry, &group),
        Route::GroupResources(group, version) => {
            discovery::resource_list(&app.registry, &group, &version)
        }
    };
    match document {
        Ok(doc) => json_response(200, &doc),
        Err(err) => error_response(&err),
    }
}

async fn handle(
    State(app): State<Arc<App>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut record = RequestRecord {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().unwrap_or_default().to_owned(),
        verb: None,
        resource: None,
        namespace: None,
        name: None,
        status: 0,
        content_type: content_type.clone(),
    };
    let response = serve(&app, &method, &uri, &headers, &body, &mut record);
    record.status = response.status().as_u16();
    tracing::debug!(
        method = %record.method,
        path = %record.path,
        query = %record.query,
        status = record.status,
        "fake apiserver request"
    );
    lock(&app.log).push(record);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> Result<Route, ApiError> {
        let mut reg = Registry::builtins();
        reg.insert(ResourceDef::new(
            "dra-autoscaler.io",
            "v1alpha1",
            "nodegroups",
            "NodeGroup",
            false,
            true,
        ));
        parse_route(&reg, path)
    }

    fn resource(path: &str) -> ResourcePath {
        match route(path) {
            Ok(Route::Resource(p)) => *p,
            other => panic!("{path} is not a resource path: {other:?}"),
        }
    }

    #[test]
    fn namespaced_and_cluster_paths() {
        let p = resource("/api/v1/namespaces/ns1/pods/p1/status");
        assert_eq!(p.def.plural, "pods");
        assert_eq!(p.namespace.as_deref(), Some("ns1"));
        assert_eq!(p.name.as_deref(), Some("p1"));
        assert_eq!(p.sub.as_deref(), Some("status"));

        let p = resource("/api/v1/namespaces/ns1/status");
        assert_eq!(p.def.plural, "namespaces");
        assert_eq!(p.name.as_deref(), Some("ns1"));
        assert_eq!(p.sub.as_deref(), Some("status"));

        let p = resource("/api/v1/pods");
        assert_eq!(p.namespace, None);

        let p = resource("/apis/dra-autoscaler.io/v1alpha1/nodegroups/g1/status");
        assert_eq!(p.def.kind, "NodeGroup");
        assert_eq!(p.namespace, None);
    }

    #[test]
    fn unknown_paths_are_not_found() {
        for path in [
            "/api/v1/widgets",
            "/api/v1/pods/p1",
            "/api/v1/namespaces/ns1/nodes/n1",
            "/api/v1/namespaces/ns1/configmaps/c/status",
            "/apis/x.io/v1/things",
            "/healthz/more/stuff",
        ] {
            assert!(
                matches!(route(path), Err(ApiError::UnknownResource)),
                "{path} should be unknown"
            );
        }
    }

    #[test]
    fn verbs_follow_method_and_shape() {
        let params = Params(vec![("watch".into(), "true".into())]);
        let none = Params(Vec::new());
        let collection = resource("/api/v1/namespaces/ns/pods");
        assert_eq!(
            verb_for(&Method::GET, &collection, &params),
            Ok(Verb::Watch)
        );
        assert_eq!(verb_for(&Method::GET, &collection, &none), Ok(Verb::List));
        assert_eq!(
            verb_for(&Method::POST, &collection, &none),
            Ok(Verb::Create)
        );
        assert_eq!(
            verb_for(&Method::DELETE, &collection, &none),
            Ok(Verb::DeleteCollection)
        );
        let all = resource("/api/v1/pods");
        assert_eq!(
            verb_for(&Method::POST, &all, &none),
            Err(ApiError::MethodNotAllowed)
        );
        let binding = resource("/api/v1/namespaces/ns/pods/p/binding");
        assert_eq!(verb_for(&Method::POST, &binding, &none), Ok(Verb::Create));
        assert_eq!(
            verb_for(&Method::PUT, &binding, &none),
            Err(ApiError::MethodNotAllowed)
        );
    }
}
