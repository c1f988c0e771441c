//! What the router hands the verbs: the server's shared state, the resource a path names,
//! the query parameters, and the JSON and `Status` responses both write. A leaf, so the
//! router (`http`) and the verbs (`verbs`) depend on it and not on each other.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, RwLock},
    time::Duration,
};

use axum::{
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use k8s_openapi::apimachinery::pkg::version::Info;
use serde_json::Value;

use crate::{
    error::ApiError,
    faults::{Faults, RequestRecord},
    resource::{Registry, ResourceDef},
    selector::{FieldSelector, LabelSelector, Selectors},
    store::Store,
};

/// Shared state of a running server.
pub(crate) struct App {
    pub registry: RwLock<Registry>,
    pub store: Arc<Mutex<Store>>,
    pub faults: Mutex<Faults>,
    pub log: Mutex<Vec<RequestRecord>>,
    pub version: Info,
    pub addr: SocketAddr,
    pub bookmark_interval: Duration,
    /// How long a read of a resourceVersion the store has not reached waits before the 504
    /// (upstream's watch cache: 3 s).
    pub too_large_wait: Duration,
    /// Run kube-apiserver's `TaintNodesByCondition` admission on Node creates.
    pub taint_new_nodes: bool,
}

/// A request for objects of one resource.
#[derive(Debug)]
pub(crate) struct ResourcePath {
    pub def: ResourceDef,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
}

/// Query parameters, first value wins.
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    /// The parameters of a query string, in order.
    pub fn new(pairs: Vec<(String, String)>) -> Self {
        Self(pairs)
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn flag(&self, key: &str) -> Option<bool> {
        self.get(key).map(|v| v == "true" || v == "1")
    }

    pub fn selectors(&self) -> Result<Selectors, ApiError> {
        Ok(Selectors {
            labels: LabelSelector::parse(self.get("labelSelector").unwrap_or_default())?,
            fields: FieldSelector::parse(self.get("fieldSelector").unwrap_or_default())?,
        })
    }

    pub fn dry_run(&self) -> bool {
        self.get("dryRun").is_some_and(|v| v == "All")
    }
}

/// A JSON response with `code`.
pub(crate) fn json_response(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

pub(crate) fn error_response(err: &ApiError) -> Response {
    let status = err.to_status();
    let mut response = json_response(err.code(), &status);
    // Upstream's response writer turns details.retryAfterSeconds into Retry-After.
    if let Some(seconds) = status
        .pointer("/details/retryAfterSeconds")
        .and_then(Value::as_u64)
        .filter(|s| *s > 0)
        && let Ok(value) = header::HeaderValue::from_str(&seconds.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}
