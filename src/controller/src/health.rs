//! `/healthz`, `/readyz` and `/metrics` on one HTTP listener.
//!
//! - `/healthz` fails when the main loop has not ticked for a while (a hung
//!   loop should get the pod restarted); followers tick too.
//! - `/readyz` succeeds once every watch has listed, so a rollout waits for a
//!   replica that can actually plan.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use k8s_openapi::jiff::Timestamp;

use crate::metrics::Metrics;

/// Shared liveness and readiness state.
#[derive(Debug, Clone)]
pub struct Health {
    ready: Arc<AtomicBool>,
    heartbeat: Arc<AtomicI64>,
    stale_after_secs: i64,
}

impl Health {
    /// Unhealthy when the loop has not ticked for `stale_after_secs`.
    #[must_use]
    pub fn new(stale_after_secs: i64) -> Self {
        Self {
            ready: Arc::new(AtomicBool::new(false)),
            heartbeat: Arc::new(AtomicI64::new(Timestamp::now().as_second())),
            stale_after_secs,
        }
    }

    /// Records a tick of the main loop at `now`.
    pub fn beat(&self, now: Timestamp) {
        self.heartbeat.store(now.as_second(), Ordering::Release);
    }

    /// Sets readiness.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Whether the loop ticked recently enough at `now`.
    #[must_use]
    pub fn is_live(&self, now: Timestamp) -> bool {
        now.as_second() - self.heartbeat.load(Ordering::Acquire) <= self.stale_after_secs
    }

    /// Whether the watches have listed.
    #[must_use]
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

#[derive(Clone)]
struct AppState {
    health: Health,
    metrics: Arc<Metrics>,
}

async fn healthz(State(state): State<AppState>) -> impl IntoResponse {
    if state.health.is_live(Timestamp::now()) {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the autoscaling loop is stuck",
        )
    }
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if state.health.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "watches have not listed yet",
        )
    }
}

async fn metrics_text(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

/// The routes.
pub fn router(health: Health, metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .with_state(AppState { health, metrics })
}

/// The listener could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("unable to listen on {addr} for health and metrics")]
pub struct ServeError {
    /// The address.
    pub addr: SocketAddr,
    /// Why.
    #[source]
    pub source: std::io::Error,
}

/// Binds `addr` and serves until `shutdown` resolves. Returns the bound
/// address (useful with port 0) and the server task.
///
/// # Errors
/// The address cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ServeError { addr, source })?;
    let task = tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::warn!(%error, "health server stopped");
        }
    });
    Ok((bound, task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_follows_the_heartbeat() {
        let health = Health::new(30);
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        health.beat(t0);
        assert!(health.is_live(Timestamp::from_second(1_800_000_030).unwrap()));
        assert!(!health.is_live(Timestamp::from_second(1_800_000_031).unwrap()));
        assert!(!health.is_ready());
        health.set_ready(true);
        assert!(health.is_ready());
    }

    #[tokio::test]
    async fn endpoints_answer_over_http() {
        let health = Health::new(30);
        let metrics = Arc::new(Metrics::new());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (addr, task) = serve(
            "127.0.0.1:0".parse().unwrap(),
            router(health.clone(), metrics),
            async move {
                let _ = stop_rx.await;
            },
        )
        .await
        .unwrap();
        let get = |path: &'static str| async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            stream
                .write_all(
                    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .as_bytes(),
                )
                .await
                .unwrap();
            let mut out = String::new();
            stream.read_to_string(&mut out).await.unwrap();
            out
        };
        assert!(get("/readyz").await.starts_with("HTTP/1.1 503"));
        health.set_ready(true);
        assert!(get("/readyz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/healthz").await.starts_with("HTTP/1.1 200"));
        assert!(get("/metrics").await.contains("dra_autoscaler_leader"));
        let _ = stop_tx.send(());
        task.await.unwrap();
    }
}
