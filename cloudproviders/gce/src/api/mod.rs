//! The Compute Engine clients and the few calls the provider makes, each turned into a plain
//! value or a [`ProviderError`] that keeps the API's error code (so it can be classified).
//!
//! Two rules hold for every call here:
//! * a long-running operation is waited for with the client's poller and then **checked**: the
//!   poller's `until_done()` answers `Ok(Operation)` for an operation that finished with an
//!   `error`, so [`finished`] reads `error.errors[].code` and `httpErrorStatusCode` itself;
//! * a rate-limited call (HTTP 429, `rateLimitExceeded`) is tried again with exponential
//!   backoff; mutations carry a `requestId`, so a retry never acts twice.

mod instances;
mod migs;
mod reservations;

use std::future::Future;
use std::time::Duration;

use dra_provider::ProviderError;
use google_cloud_compute_v1::client;
use google_cloud_compute_v1::model::Operation;
use google_cloud_gax::error::rpc::StatusDetails;

use crate::errors::{GceErrorKind, classify, scale_up_error};

pub use instances::{BulkInsert, TrackedInstance};
pub use migs::{ManagedInstanceInfo, MigInfo, ResizeRequestInfo, ResizeRequestState, TemplateInfo};
pub use reservations::{FutureReservationInfo, MachineTypeInfo, ReservationInfo};

/// Where a resource lives.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// A zone, e.g. `us-central1-a`.
    Zone(String),
    /// A region, e.g. `us-central1`.
    Region(String),
}

impl Scope {
    /// The zone or region name.
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Self::Zone(z) | Self::Region(z) => z,
        }
    }

    /// The region of a zone (`us-central1-a` → `us-central1`), or the region itself.
    #[must_use]
    pub fn region(&self) -> String {
        match self {
            Self::Zone(z) => region_of(z),
            Self::Region(r) => r.clone(),
        }
    }

    /// Parses an aggregated list key or URL part: `zones/<z>` or `regions/<r>`.
    #[must_use]
    pub fn from_key(key: &str) -> Option<Self> {
        let mut parts = key.trim_matches('/').rsplitn(2, '/');
        let name = parts.next()?.to_owned();
        let kind = parts.next()?.rsplit('/').next()?;
        match kind {
            "zones" => Some(Self::Zone(name)),
            "regions" => Some(Self::Region(name)),
            _ => None,
        }
    }
}

/// The region of zone `zone`: everything before its last `-`.
#[must_use]
pub fn region_of(zone: &str) -> String {
    zone.rsplit_once('-')
        .map_or_else(|| zone.to_owned(), |(r, _)| r.to_owned())
}

/// The last path segment of a resource URL (`…/machineTypes/a3-highgpu-8g` → `a3-highgpu-8g`).
#[must_use]
pub fn last_segment(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// How calls are made: endpoint and credentials for emulators, retry and polling pace.
#[derive(Debug, Clone)]
pub struct Connection {
    /// Compute's endpoint; Google's own when `None`.
    pub endpoint: Option<String>,
    /// Send no credentials (a local stand-in); Application Default Credentials otherwise.
    pub anonymous: bool,
    /// Attempts of a rate-limited call, the first included.
    pub attempts: u32,
    /// First delay before retrying a rate-limited call; doubles each time.
    pub retry_delay: Duration,
    /// First delay between polls of an operation; the poller backs off from it.
    pub poll_delay: Duration,
}

impl Default for Connection {
    fn default() -> Self {
        Self {
            endpoint: None,
            anonymous: false,
            attempts: 6,
            retry_delay: Duration::from_millis(500),
            poll_delay: Duration::from_secs(1),
        }
    }
}

/// The clients and the project they act in.
#[derive(Debug, Clone)]
pub struct Gce {
    /// Project id.
    pub project: String,
    pub(crate) connection: Connection,
    pub(crate) migs: client::InstanceGroupManagers,
    pub(crate) region_migs: client::RegionInstanceGroupManagers,
    pub(crate) resize_requests: client::InstanceGroupManagerResizeRequests,
    pub(crate) region_resize_requests: client::RegionInstanceGroupManagerResizeRequests,
    pub(crate) templates: client::InstanceTemplates,
    pub(crate) region_templates: client::RegionInstanceTemplates,
    pub(crate) machine_types: client::MachineTypes,
    pub(crate) instances: client::Instances,
    pub(crate) region_instances: client::RegionInstances,
    pub(crate) reservations: client::Reservations,
    pub(crate) future_reservations: client::FutureReservations,
}

/// Builds one client the same way as all the others.
macro_rules! build {
    ($client:ty, $connection:expr) => {{
        let connection: &Connection = $connection;
        let mut builder = <$client>::builder().with_polling_backoff_policy(
            google_cloud_gax::exponential_backoff::ExponentialBackoffBuilder::new()
                .with_initial_delay(connection.poll_delay)
                .with_maximum_delay(connection.poll_delay * 10)
                .build()
                .map_err(|e| ProviderError::Internal {
                    message: format!("polling backoff: {e}"),
                })?,
        );
        if let Some(endpoint) = &connection.endpoint {
            builder = builder.with_endpoint(endpoint.clone());
        }
        if connection.anonymous {
            builder = builder
                .with_credentials(google_cloud_auth::credentials::anonymous::Builder::new().build());
        }
        builder.build().await.map_err(|e| ProviderError::Internal {
            message: format!(
                "unable to create the Compute Engine client (Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, gcloud, or the metadata server / Workload Identity): {e}"
            ),
        })?
    }};
}

impl Gce {
    /// Clients for `project`. Without an endpoint they talk to Google with Application Default
    /// Credentials (on GKE, the Kubernetes service account bound by Workload Identity).
    ///
    /// # Errors
    /// [`ProviderError::Internal`] when a client cannot be created (no credentials found).
    pub async fn connect(project: &str, connection: Connection) -> Result<Self, ProviderError> {
        // google-cloud-auth's reqwest uses rustls' process-level provider (the crate is built
        // without its `default-rustls-provider`, see Cargo.toml): install ring, the workspace's
        // choice, so it never depends on which rustls back ends a build happens to enable. A
        // no-op when the process has installed one already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let c = &connection;
        Ok(Self {
            project: project.to_owned(),
            migs: build!(client::InstanceGroupManagers, c),
            region_migs: build!(client::RegionInstanceGroupManagers, c),
            resize_requests: build!(client::InstanceGroupManagerResizeRequests, c),
            region_resize_requests: build!(client::RegionInstanceGroupManagerResizeRequests, c),
            templates: build!(client::InstanceTemplates, c),
            region_templates: build!(client::RegionInstanceTemplates, c),
            machine_types: build!(client::MachineTypes, c),
            instances: build!(client::Instances, c),
            region_instances: build!(client::RegionInstances, c),
            reservations: build!(client::Reservations, c),
            future_reservations: build!(client::FutureReservations, c),
            connection,
        })
    }

    /// Runs `call`, again after a backoff while the API answers with a rate limit.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        action: &str,
        mut call: F,
    ) -> Result<T, ProviderError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, google_cloud_gax::error::Error>>,
    {
        let mut delay = self.connection.retry_delay;
        let mut attempt = 1;
        loop {
            match call().await {
                Ok(value) => return Ok(value),
                Err(err) => {
                    let mapped = api_error(action, &err);
                    let limited =
                        matches!(&mapped, ProviderError::Unavailable { .. }) && is_rate_limit(&err);
                    if !limited || attempt >= self.connection.attempts {
                        return Err(mapped);
                    }
                    tracing::info!(
                        action,
                        attempt,
                        delay_ms = delay.as_millis(),
                        "rate limited, retrying"
                    );
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                    attempt += 1;
                }
            }
        }
    }
}

/// The error codes (`reason`s) a failed call carries.
fn reasons(err: &google_cloud_gax::error::Error) -> Vec<String> {
    err.status()
        .map(|s| {
            s.details
                .iter()
                .filter_map(|d| match d {
                    StatusDetails::ErrorInfo(info) if !info.reason.is_empty() => {
                        Some(info.reason.clone())
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn is_rate_limit(err: &google_cloud_gax::error::Error) -> bool {
    err.http_status_code() == Some(429)
        || reasons(err)
            .iter()
            .any(|r| classify(r) == GceErrorKind::RateLimit)
}

/// A failed call as a [`ProviderError`]: not found, rate limited or unavailable (retry), quota,
/// stockout, refused (4xx) or other.
#[must_use]
pub fn api_error(action: &str, err: &google_cloud_gax::error::Error) -> ProviderError {
    let message = err
        .status()
        .map(|s| s.message.clone())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| err.to_string());
    let text = format!("{action}: {message}");
    let reasons = reasons(err);
    let kind = reasons
        .iter()
        .map(|r| (r, classify(r)))
        .find(|(_, k)| *k != GceErrorKind::Other);
    if is_rate_limit(err) {
        return ProviderError::Unavailable { message: text };
    }
    if let Some((code, kind)) = kind {
        return match kind {
            GceErrorKind::Quota => ProviderError::Quota {
                code: code.clone(),
                message: text,
            },
            GceErrorKind::Stockout => ProviderError::OutOfCapacity {
                code: code.clone(),
                message: text,
                rolled_back: 0,
            },
            GceErrorKind::RateLimit | GceErrorKind::Other => {
                ProviderError::Unavailable { message: text }
            }
        };
    }
    match err.http_status_code() {
        Some(404) => ProviderError::NotFound { what: text },
        Some(400 | 409 | 412) => ProviderError::InvalidArgument { message: text },
        Some(code) if code >= 500 => ProviderError::Unavailable { message: text },
        None if err.is_io() || err.is_timeout() || err.is_connect() => {
            ProviderError::Unavailable { message: text }
        }
        _ => ProviderError::Internal { message: text },
    }
}

/// The first error code and all messages of a finished operation, if it failed.
#[must_use]
pub fn operation_failure(op: &Operation) -> Option<(String, String)> {
    let errors = op
        .error
        .as_ref()
        .map(|e| e.errors.as_slice())
        .unwrap_or_default();
    if errors.is_empty() && op.http_error_status_code.is_none_or(|c| c < 400) {
        return None;
    }
    let code = errors
        .iter()
        .find_map(|e| e.code.clone())
        .or_else(|| op.http_error_status_code.map(|c| format!("HTTP_{c}")))
        .unwrap_or_else(|| "OPERATION_FAILED".to_owned());
    let mut messages: Vec<String> = errors.iter().filter_map(|e| e.message.clone()).collect();
    if messages.is_empty() {
        messages.extend(op.http_error_message.clone());
    }
    Some((code, messages.join("; ")))
}

/// Checks a finished operation: `Ok` only when it carries no error.
///
/// # Errors
/// The operation's error classified by its first code ([`scale_up_error`]).
pub fn finished(action: &str, op: Operation) -> Result<Operation, ProviderError> {
    match operation_failure(&op) {
        None => Ok(op),
        Some((code, message)) => {
            tracing::warn!(action, code, message, operation = ?op.name, "operation finished with an error");
            Err(scale_up_error(&code, format!("{action}: {message}"), 0))
        }
    }
}
