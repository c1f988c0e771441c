//! Server harness shared by our providers: one [`CloudProvider`] served as externalgrpc's
//! `CloudProvider` and as `NodeGroupExtensions`, plus the standard gRPC health service, TLS or
//! mTLS from files, and graceful shutdown.

mod extensions;
mod externalgrpc;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic_health::ServingStatus;

use crate::pb::extensions::node_group_extensions_server::{self, NodeGroupExtensionsServer};
use crate::pb::externalgrpc::cloud_provider_server::{self, CloudProviderServer};
use crate::provider::CloudProvider;

pub use extensions::ExtensionsService;
pub use externalgrpc::ExternalGrpcService;

/// Runs a call that changes the cloud on a task of its own, so that it finishes even when the
/// client gives up: tonic drops a handler's future when the caller's deadline passes or its
/// connection closes, and a start cut off half way leaves machines no request id records.
/// The client re-sends the same request id after an unknown outcome and gets the answer the
/// finished call recorded.
async fn detached<T, F>(call: &'static str, work: F) -> Result<T, tonic::Status>
where
    F: Future<Output = Result<T, crate::ProviderError>> + Send + 'static,
    T: Send + 'static,
{
    match tokio::spawn(work).await {
        Ok(result) => result.map_err(Into::into),
        Err(error) => Err(crate::ProviderError::Internal {
            message: format!("{call} did not finish: {error}"),
        }
        .into()),
    }
}

/// Server certificate, key and (for mTLS) the CA that client certificates must chain to.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// PEM certificate chain of the server.
    pub cert: PathBuf,
    /// PEM private key of the server.
    pub key: PathBuf,
    /// PEM CA bundle; when set, clients must present a certificate signed by it.
    pub client_ca: Option<PathBuf>,
}

/// How to serve.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// TLS; plaintext when `None` (what externalgrpc does without certificates).
    pub tls: Option<ServerTls>,
    /// Also fill the field numbers cluster-autoscaler <= 1.34 reads (template node in field 1,
    /// meta.v1.Duration options). Off by default so replies are byte for byte what a >= 1.35
    /// upstream server sends.
    pub legacy_fields: bool,
}

/// Failure to start or run the server.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A TLS file could not be read.
    #[error("unable to read TLS {what} file {path}")]
    TlsFile {
        /// Which file.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// tonic rejected the TLS settings or failed while serving.
    #[error("gRPC server failed")]
    Transport(#[source] tonic::transport::Error),
}

async fn read(what: &'static str, path: &PathBuf) -> Result<Vec<u8>, ServeError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| ServeError::TlsFile {
            what,
            path: path.clone(),
            source,
        })
}

async fn tls_config(tls: &ServerTls) -> Result<ServerTlsConfig, ServeError> {
    let cert = read("server certificate", &tls.cert).await?;
    let key = read("server key", &tls.key).await?;
    let mut config = ServerTlsConfig::new().identity(Identity::from_pem(cert, key));
    if let Some(ca) = &tls.client_ca {
        config = config.client_ca_root(Certificate::from_pem(read("client CA", ca).await?));
    }
    Ok(config)
}

/// Serves `provider` on `listener` until `shutdown` completes, then drains in-flight calls.
///
/// Health: both service names and the empty name report SERVING while up and NOT_SERVING once
/// shutdown starts, so a readiness probe stops routing before the listener closes.
///
/// # Errors
/// [`ServeError`] when TLS files are unreadable or invalid, or the transport fails.
pub async fn serve<P: CloudProvider>(
    provider: Arc<P>,
    listener: TcpListener,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let names = [
        "",
        cloud_provider_server::SERVICE_NAME,
        node_group_extensions_server::SERVICE_NAME,
    ];
    for name in names {
        reporter
            .set_service_status(name, ServingStatus::Serving)
            .await;
    }
    let mut builder = Server::builder();
    if let Some(tls) = &options.tls {
        builder = builder
            .tls_config(tls_config(tls).await?)
            .map_err(ServeError::Transport)?;
    }
    let externalgrpc = ExternalGrpcService::new(Arc::clone(&provider), options.legacy_fields);
    let extensions = ExtensionsService::new(provider);
    let local = listener.local_addr().ok();
    tracing::info!(address = ?local, tls = options.tls.is_some(), "serving cloud provider");
    let shutdown = async move {
        shutdown.await;
        for name in names {
            reporter
                .set_service_status(name, ServingStatus::NotServing)
                .await;
        }
        tracing::info!("shutting down cloud provider server");
    };
    builder
        .add_service(health)
        .add_service(CloudProviderServer::new(externalgrpc))
        .add_service(NodeGroupExtensionsServer::new(extensions))
        .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
        .await
        .map_err(ServeError::Transport)
}
