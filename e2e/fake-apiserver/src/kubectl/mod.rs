//! What only kubectl asks of the stand-in: server-side printing (`Accept:
//! application/json;as=Table;v=v1;g=meta.k8s.io`, with upstream's columns) and the OpenAPI v3
//! documents it reads before a write.
//!
//! Behind the `kubectl` cargo feature, on by default (the binary is what people point kubectl
//! at) and asked for by `e2e/local`. kube clients never ask for either, so the crates that run
//! the stand-in inside their tests depend on it without default features and do not build
//! this half. Built without it, a Table request gets the plain object or list (what a server
//! without Table support answers; kubectl prints that too) and the OpenAPI routes answer 404.
//!
//! The rest of the server only calls the functions below, whatever the feature.

#[cfg(feature = "kubectl")]
mod cells;
#[cfg(feature = "kubectl")]
mod openapi;
#[cfg(feature = "kubectl")]
mod printers;
#[cfg(feature = "kubectl")]
mod table;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::error::ApiError;
use crate::resource::{Registry, ResourceDef};

/// A request's ask for a Table, and what its rows carry.
#[cfg(feature = "kubectl")]
pub use table::IncludeObject as TableRequest;

/// A request's ask for a Table: none can be made without the `kubectl` feature.
#[cfg(not(feature = "kubectl"))]
#[derive(Clone, Copy, Debug)]
pub enum TableRequest {}

/// The Table a request asks for, from its `Accept` header and `includeObject` parameter;
/// `None` when it asks for objects (or the feature is off).
pub fn table_request(accept: Option<&str>, include_object: Option<&str>) -> Option<TableRequest> {
    #[cfg(feature = "kubectl")]
    {
        table::wants_table(accept).then(|| TableRequest::from_param(include_object))
    }
    #[cfg(not(feature = "kubectl"))]
    {
        let _ = (accept, include_object);
        None
    }
}

/// A Table of `objects` at list resourceVersion `rv`; `headers: false` leaves the column
/// definitions out (watch events after the first).
pub fn table(
    def: &ResourceDef,
    objects: &[Value],
    rv: Option<u64>,
    request: TableRequest,
    headers: bool,
    now: Timestamp,
) -> Value {
    #[cfg(feature = "kubectl")]
    {
        table::table(def, objects, rv, request, headers, now)
    }
    #[cfg(not(feature = "kubectl"))]
    {
        let _ = (def, objects, rv, headers, now);
        match request {}
    }
}

/// `/openapi/v3`: every group-version's document, with a hash that changes with it.
///
/// # Errors
/// 404 without the `kubectl` feature.
pub fn openapi_index(registry: &Registry, kube_version: &str) -> Result<Value, ApiError> {
    #[cfg(feature = "kubectl")]
    {
        Ok(openapi::index(registry, kube_version))
    }
    #[cfg(not(feature = "kubectl"))]
    {
        let _ = (registry, kube_version);
        Err(ApiError::UnknownResource)
    }
}

/// The OpenAPI v3 document of one group-version (`group` empty for the core group).
///
/// # Errors
/// 404 when nothing is served there, or without the `kubectl` feature.
pub fn openapi_group_version(
    registry: &Registry,
    group: &str,
    version: &str,
    kube_version: &str,
) -> Result<Value, ApiError> {
    #[cfg(feature = "kubectl")]
    {
        openapi::group_version(registry, group, version, kube_version)
    }
    #[cfg(not(feature = "kubectl"))]
    {
        let _ = (registry, group, version, kube_version);
        Err(ApiError::UnknownResource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

    #[cfg(feature = "kubectl")]
    #[test]
    fn kubectls_asks_are_served() {
        assert!(table_request(Some(KUBECTL_ACCEPT), None).is_some());
        assert!(table_request(Some("application/json"), None).is_none());
        assert!(openapi_index(&Registry::builtins(), "v1.37.2").is_ok());
    }

    #[cfg(not(feature = "kubectl"))]
    #[test]
    fn without_the_feature_tables_are_plain_and_openapi_is_not_found() {
        assert!(table_request(Some(KUBECTL_ACCEPT), None).is_none());
        assert!(matches!(
            openapi_index(&Registry::builtins(), "v1.37.2"),
            Err(ApiError::UnknownResource)
        ));
        assert!(matches!(
            openapi_group_version(&Registry::builtins(), "", "v1", "v1.37.2"),
            Err(ApiError::UnknownResource)
        ));
    }
}
