//! The HTTP surface: path parsing, verb mapping, fault injection, request logging, the
//! non-resource documents (health, version, discovery, OpenAPI), and the hand-off of resource
//! requests to [`crate::verbs`].
//!
//! Paths are parsed by hand rather than with axum routes because the API's grammar
//! (`/api/v1/namespaces/{ns}/pods` vs `/api/v1/namespaces/{name}/status`) depends on
//! which resources are registered, and CustomResourceDefinitions change that at run time.

use std::{sync::Arc, time::Instant};

use axum::{
    Router,
    body::Bytes,
    extract::{DefaultBodyLimit, Query, State},
    http::{HeaderMap, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};

use crate::{
    discovery,
    error::ApiError,
    faults::{RequestRecord, Verb},
    kubectl, lock, read_lock,
    request::{App, Params, ResourcePath, error_response, json_response},
    resource::Registry,
    verbs,
};

/// The request body limit of the real server (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// The axum router serving everything.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .fallback(handle)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
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
    OpenApiIndex,
    OpenApiGroupVersion(String, String),
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
        ["openapi", "v3"] => Ok(Route::OpenApiIndex),
        ["openapi", "v3", "api", version] => Ok(Route::OpenApiGroupVersion(
            String::new(),
            (*version).to_owned(),
        )),
        ["openapi", "v3", "apis", group, version] => Ok(Route::OpenApiGroupVersion(
            (*group).to_owned(),
            (*version).to_owned(),
        )),
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

/// The verb a method names on a resource path, if any.
fn verb_for(method: &Method, path: &ResourcePath, params: &Params) -> Result<Verb, ApiError> {
    let sub = path.sub.as_deref();
    let has_ns = path.namespace.is_some() || !path.def.namespaced;
    let verb = match (method.as_str(), &path.name, sub) {
        ("GET", None, None) if params.flag("watch") == Some(true) => Verb::Watch,
        ("GET", None, None) => Verb::List,
        ("GET", Some(_), None | Some("status")) => Verb::Get,
        ("POST", None, None) if has_ns => Verb::Create,
        ("POST", Some(_), Some("binding" | "eviction")) => Verb::Create,
        ("PUT", Some(_), None | Some("status")) => Verb::Update,
        ("PATCH", Some(_), None | Some("status")) => Verb::Patch,
        ("DELETE", Some(_), None) => Verb::Delete,
        ("DELETE", None, None) if has_ns => Verb::DeleteCollection,
        _ => return Err(ApiError::MethodNotAllowed),
    };
    Ok(verb)
}

/// Serves a document that is not a resource (health, version, discovery, OpenAPI).
fn serve_document(app: &App, route: Route, method: &Method, headers: &HeaderMap) -> Response {
    if method != Method::GET {
        return error_response(&ApiError::MethodNotAllowed);
    }
    let registry = read_lock(&app.registry);
    let document = match route {
        // Plain text, as upstream answers health probes; handy for shell scripts.
        Route::Health => return (StatusCode::OK, "ok").into_response(),
        Route::Version => discovery::version(&app.version),
        Route::OpenApiIndex => kubectl::openapi_index(&registry, &app.version.git_version),
        Route::OpenApiGroupVersion(group, version) => {
            kubectl::openapi_group_version(&registry, &group, &version, &app.version.git_version)
        }
        listing @ (Route::CoreVersions | Route::Groups)
            if discovery::wants_aggregated(
                headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()),
            ) =>
        {
            let core = matches!(listing, Route::CoreVersions);
            return match discovery::aggregated(&registry, core) {
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
        Route::Groups => discovery::group_list(&registry),
        Route::Group(group) => discovery::group(&registry, &group),
        Route::GroupResources(group, version) => {
            discovery::resource_list(&registry, &group, &version)
        }
        Route::Resource(_) => Err(ApiError::UnknownResource),
    };
    match document {
        Ok(doc) => json_response(200, &doc),
        Err(err) => error_response(&err),
    }
}

/// Serves one request and fills in what the request log records about it.
async fn serve(
    app: &Arc<App>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
    record: &mut RequestRecord,
) -> Response {
    let params = match Query::<Vec<(String, String)>>::try_from_uri(uri) {
        Ok(Query(pairs)) => Params::new(pairs),
        Err(e) => {
            return error_response(&ApiError::BadRequest(format!("invalid query string: {e}")));
        }
    };
    let route = match parse_route(&read_lock(&app.registry), uri.path()) {
        Ok(route) => route,
        Err(err) => return error_response(&err),
    };
    let Route::Resource(path) = route else {
        return serve_document(app, route, method, headers);
    };
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
    let injected = lock(&app.faults).take(verb, record.resource.as_deref().unwrap_or_default());
    if let Some(code) = injected {
        return error_response(&ApiError::injected(code));
    }
    verbs::serve_resource(app, &path, verb, &params, headers, body)
        .await
        .unwrap_or_else(|err| error_response(&err))
}

async fn handle(
    State(app): State<Arc<App>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let started = Instant::now();
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
    let response = serve(&app, &method, &uri, &headers, &body, &mut record).await;
    record.status = response.status().as_u16();
    tracing::debug!(
        method = %record.method,
        path = %record.path,
        query = %record.query,
        status = record.status,
        elapsed_ms = started.elapsed().as_millis(),
        "request"
    );
    lock(&app.log).push(record);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::ResourceDef;

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
        let params = Params::new(vec![("watch".into(), "true".into())]);
        let none = Params::new(Vec::new());
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
