//! An in-process stand-in for the Kubernetes API server, for integration and e2e
//! tests of code that talks to a cluster through kube-rs.
//!
//! There is no kube-apiserver, envtest or kind on the machines this project builds
//! on, so tests run against this server instead. It speaks real HTTP, so a plain
//! [`kube::Client`] (or a binary given [`FakeApiServer::kubeconfig_yaml`]) works
//! unmodified, and it is faithful where kube clients, kube-runtime watchers and
//! reflectors care:
//!
//! - objects are JSON stored per (resource, namespace, name); one global
//!   resourceVersion counter is stamped on every write, with `uid`,
//!   `creationTimestamp`, `generation` and `generateName` handled as upstream;
//! - GET, LIST (label and field selectors), POST, PUT (optimistic concurrency),
//!   PATCH (merge, JSON patch, strategic merge and apply approximated as merges),
//!   DELETE with finalizers, deletecollection, `/status`, Pod `/binding` and Pod `/eviction`
//!   (PodDisruptionBudget rules as upstream's eviction subresource);
//! - writes that change nothing bump nothing and emit no watch event;
//! - WATCH replays a bounded per-resource history from a resourceVersion, answers
//!   too-old versions with a 410 Expired ERROR event, sends bookmarks, supports
//!   streaming lists (`sendInitialEvents=true`) and honours `timeoutSeconds`;
//! - errors are `Status` objects with upstream reasons and codes;
//! - discovery documents for everything registered.
//!
//! Not modelled: admission, schema validation, server-side-apply field ownership,
//! garbage collection, RBAC/authentication, graceful Pod deletion, pagination.
//! See `docs/testing.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use dra_fake_apiserver::{FakeApiServer, Verb};
//! let server = FakeApiServer::builder()
//!     .resource("dra-autoscaler.io", "v1alpha1", "nodegroups", "NodeGroup", false, true)
//!     .start()
//!     .await?;
//! let client = server.client();
//! server.fail_next(Verb::Create, "nodes", 2, 500);
//! # drop(client);
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Data flow: `http` parses the path into a resource and verb, consults the fault
//! rules, then calls the synchronous `store`, which uses the pure `object` and `patch`
//! functions to build the candidate object, stamps it and publishes a change that
//! `watch` tasks stream to clients.

use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

mod apply;
mod convert;
mod crd;
mod discovery;
mod error;
mod eviction;
mod faults;
mod http;
mod kubectl;
mod object;
mod openapi;
mod patch;
mod persist;
mod request;
mod resource;
mod schema;
mod selector;
mod server;
mod store;
mod verbs;
mod watch;

pub use error::ApiError;
pub use faults::{RequestRecord, Verb};
pub use persist::{StateError, UNCLEAN_BUMP};
pub use resource::{ResourceDef, StatusOnCreate};
pub use server::{
    DEFAULT_HISTORY_LIMIT, FakeApiServer, FakeApiServerBuilder, StartError, kubeconfig_yaml,
};

/// Locks a mutex, recovering the data if a panicking holder poisoned it: every
/// critical section leaves the store consistent before anything can panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Read-locks the registry (see [`lock`] on poisoning).
pub(crate) fn read_lock<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// Write-locks the registry (see [`lock`] on poisoning).
pub(crate) fn write_lock<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}
