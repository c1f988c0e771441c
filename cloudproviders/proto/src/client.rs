//! The controller's client for a provider: externalgrpc plus our extension on one channel.
//!
//! Every call has a deadline (sent as `grpc-timeout` and enforced locally). Only idempotent
//! calls are retried, with exponential backoff, and only on codes that say "try again"
//! (UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED, UNKNOWN) or a local timeout. Size changes and
//! deletions are never retried: a lost answer must not turn into a second scale-up.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, SystemTime};

use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Request, Response, Status};

use crate::convert::{details_from_pb, options_from_pb, options_to_pb, timestamp};
use crate::error::{ClientError, is_retryable};
use crate::k8s_proto::decode_node;
use crate::model::{
    AtomicIncrease, AutoscalingOptions, Instance, InstanceDetails, NodeGroupDetails, NodeGroupRef,
    NodeRef, TemplateNode,
};
use crate::pb::extensions as ext;
use crate::pb::extensions::node_group_extensions_client::NodeGroupExtensionsClient;
use crate::pb::externalgrpc as ca;
use crate::pb::externalgrpc::cloud_provider_client::CloudProviderClient;

/// CA certificate and, for mTLS, our client certificate and key (PEM files).
#[derive(Debug, Clone)]
pub struct ClientTls {
    /// CA bundle the server certificate must chain to.
    pub ca: PathBuf,
    /// Client certificate for mTLS.
    pub cert: Option<PathBuf>,
    /// Client key for mTLS.
    pub key: Option<PathBuf>,
    /// Name to verify the server certificate against, when it differs from the endpoint host.
    pub domain: Option<String>,
}

/// Backoff for retried idempotent calls.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (1 = no retry).
    pub max_attempts: u32,
    /// Wait before the second attempt; doubled after each failure.
    pub initial_backoff: Duration,
    /// Upper bound for one wait.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        }
    }
}

/// How to reach a provider.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `http://host:port` or `https://host:port`.
    pub endpoint: String,
    /// TLS; plaintext when `None`.
    pub tls: Option<ClientTls>,
    /// Deadline of one attempt (externalgrpc's default is 5 s).
    pub call_timeout: Duration,
    /// Deadline for establishing the connection.
    pub connect_timeout: Duration,
    /// Retries of idempotent calls.
    pub retry: RetryPolicy,
}

impl ClientConfig {
    /// Plaintext config with externalgrpc's defaults.
    #[must_use]
    pub fn new(endpoint: impl Into<String>) -> Self {
        Self {
            endpoint: endpoint.into(),
            tls: None,
            call_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(5),
            retry: RetryPolicy::default(),
        }
    }
}

const EXT_UNKNOWN: u8 = 0;
const EXT_PRESENT: u8 = 1;
const EXT_MISSING: u8 = 2;

/// What is lost without the extension; logged once when it turns out to be missing.
pub const FEATURES_NEEDING_EXTENSIONS: &str = "DRA ResourceSlice templates (scale-from-zero for claims), \
capacity type, reservations, prices, priorities and topology domains per node group, atomic (gang) \
scale-up with rollback, and per-instance error classes and reservations";

/// A connection to one provider.
#[derive(Debug)]
pub struct ProviderClient {
    ca: CloudProviderClient<Channel>,
    ext: NodeGroupExtensionsClient<Channel>,
    config: ClientConfig,
    extensions: AtomicU8,
}

async fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, ClientError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| ClientError::TlsFile {
            what,
            path: path.display().to_string(),
            source,
        })
}

impl ProviderClient {
    /// Builds the client. The connection is made lazily on the first call, so a provider that
    /// starts after the controller is not an error here.
    ///
    /// # Errors
    /// [`ClientError::TlsFile`] or [`ClientError::Endpoint`] (category `Config`).
    pub async fn connect(config: ClientConfig) -> Result<Self, ClientError> {
        let endpoint_err = |source| ClientError::Endpoint {
            endpoint: config.endpoint.clone(),
            source,
        };
        let mut endpoint = Endpoint::from_shared(config.endpoint.clone())
            .map_err(endpoint_err)?
            .connect_timeout(config.connect_timeout);
        if let Some(tls) = &config.tls {
            let mut tls_config = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(read("CA", &tls.ca).await?));
            match (&tls.cert, &tls.key) {
                (Some(cert), Some(key)) => {
                    let identity = Identity::from_pem(
                        read("client certificate", cert).await?,
                        read("client key", key).await?,
                    );
                    tls_config = tls_config.identity(identity);
                }
                (None, None) => {}
                (Some(_), None) | (None, Some(_)) => {
                    return Err(ClientError::TlsFile {
                        what: "client certificate/key pair",
                        path: "(only one of the two was given)".to_owned(),
                        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
                    });
                }
            }
            if let Some(domain) = &tls.domain {
                tls_config = tls_config.domain_name(domain.clone());
            }
            endpoint = endpoint.tls_config(tls_config).map_err(endpoint_err)?;
        }
        let channel = endpoint.connect_lazy();
        Ok(Self {
            ca: CloudProviderClient::new(channel.clone()),
            ext: NodeGroupExtensionsClient::new(channel),
            config,
            extensions: AtomicU8::new(EXT_UNKNOWN),
        })
    }

    /// One RPC with deadline, and retries when `idempotent`.
    async fn unary<M, R, Fut>(
        &self,
        method: &'static str,
        idempotent: bool,
        message: M,
        call: impl Fn(Request<M>) -> Fut,
    ) -> Result<R, ClientError>
    where
        M: Clone,
        Fut: Future<Output = Result<Response<R>, Status>>,
    {
        let attempts = if idempotent {
            self.config.retry.max_attempts.max(1)
        } else {
            1
        };
        let mut backoff = self.config.retry.initial_backoff;
        let mut attempt = 1;
        loop {
            let mut request = Request::new(message.clone());
            request.set_timeout(self.config.call_timeout);
            let error = match tokio::time::timeout(self.config.call_timeout, call(request)).await {
                Ok(Ok(response)) => return Ok(response.into_inner()),
                Ok(Err(status)) => {
                    let retry = is_retryable(status.code());
                    (ClientError::from_status(method, status), retry)
                }
                Err(_) => (
                    ClientError::Timeout {
                        method,
                        timeout: self.config.call_timeout,
                    },
                    true,
                ),
            };
            match error {
                (error, true) if attempt < attempts => {
                    tracing::debug!(method, attempt, %error, ?backoff, "retrying idempotent provider call");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.config.retry.max_backoff);
                    attempt += 1;
                }
                (error, _) => return Err(error),
            }
        }
    }

    /// All node groups (`NodeGroups`).
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn node_groups(&self) -> Result<Vec<NodeGroupRef>, ClientError> {
        let response = self
            .unary("NodeGroups", true, ca::NodeGroupsRequest {}, |r| {
                let mut c = self.ca.clone();
                async move { c.node_groups(r).await }
            })
            .await?;
        Ok(response.node_groups.into_iter().map(Into::into).collect())
    }

    /// The group of a node; `None` when the provider does not manage it.
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn node_group_for_node(
        &self,
        node: &NodeRef,
    ) -> Result<Option<NodeGroupRef>, ClientError> {
        let message = ca::NodeGroupForNodeRequest {
            node: Some(node.into()),
        };
        let response = self
            .unary("NodeGroupForNode", true, message, |r| {
                let mut c = self.ca.clone();
                async move { c.node_group_for_node(r).await }
            })
            .await?;
        Ok(response
            .node_group
            .filter(|g| !g.id.is_empty())
            .map(Into::into))
    }

    /// Price of a node over a period (optional RPC: `NotImplemented` when unsupported).
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn node_price(
        &self,
        node: &NodeRef,
        start: SystemTime,
        end: SystemTime,
    ) -> Result<f64, ClientError> {
        let message = ca::PricingNodePriceRequest {
            node: Some(node.into()),
            start_timestamp: Some(timestamp(start)),
            end_timestamp: Some(timestamp(end)),
            ..Default::default()
        };
        let response = self
            .unary("PricingNodePrice", true, message, |r| {
                let mut c = self.ca.clone();
                async move { c.pricing_node_price(r).await }
            })
            .await?;
        Ok(response.price)
    }

    /// Price of a pod (Go `Marshal()` bytes of a v1.Pod) over a period (optional RPC).
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn pod_price(
        &self,
        pod_bytes: Vec<u8>,
        start: SystemTime,
        end: SystemTime,
    ) -> Result<f64, ClientError> {
        let message = ca::PricingPodPriceRequest {
            pod_bytes,
            start_timestamp: Some(timestamp(start)),
            end_timestamp: Some(timestamp(end)),
            ..Default::default()
        };
        let response = self
            .unary("PricingPodPrice", true, message, |r| {
                let mut c = self.ca.clone();
                async move { c.pricing_pod_price(r).await }
            })
            .await?;
        Ok(response.price)
    }

    /// The GPU node label.
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn gpu_label(&self) -> Result<String, ClientError> {
        let response = self
            .unary("GPULabel", true, ca::GpuLabelRequest {}, |r| {
                let mut c = self.ca.clone();
                async move { c.gpu_label(r).await }
            })
            .await?;
        Ok(response.label)
    }

    /// GPU type names (the keys of `gpuTypes`, sorted).
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn available_gpu_types(&self) -> Result<Vec<String>, ClientError> {
        let response = self
            .unary(
                "GetAvailableGPUTypes",
                true,
                ca::GetAvailableGpuTypesRequest {},
                |r| {
                    let mut c = self.ca.clone();
                    async move { c.get_available_gpu_types(r).await }
                },
            )
            .await?;
        Ok(response.gpu_types.into_keys().collect())
    }

    /// `Cleanup` (not retried).
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn cleanup(&self) -> Result<(), ClientError> {
        self.unary("Cleanup", false, ca::CleanupRequest {}, |r| {
            let mut c = self.ca.clone();
            async move { c.cleanup(r).await }
        })
        .await
        .map(drop)
    }

    /// `Refresh`, called before every loop.
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn refresh(&self) -> Result<(), ClientError> {
        self.unary("Refresh", true, ca::RefreshRequest {}, |r| {
            let mut c = self.ca.clone();
            async move { c.refresh(r).await }
        })
        .await
        .map(drop)
    }

    /// Target size of a group.
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn target_size(&self, id: &str) -> Result<i32, ClientError> {
        let message = ca::NodeGroupTargetSizeRequest { id: id.to_owned() };
        let response = self
            .unary("NodeGroupTargetSize", true, message, |r| {
                let mut c = self.ca.clone();
                async move { c.node_group_target_size(r).await }
            })
            .await?;
        Ok(response.target_size)
    }

    /// Grow a group by `delta` (not retried, not atomic).
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn increase_size(&self, id: &str, delta: i32) -> Result<(), ClientError> {
        let message = ca::NodeGroupIncreaseSizeRequest {
            delta,
            id: id.to_owned(),
        };
        self.unary("NodeGroupIncreaseSize", false, message, |r| {
            let mut c = self.ca.clone();
            async move { c.node_group_increase_size(r).await }
        })
        .await
        .map(drop)
    }

    /// Delete nodes of a group (not retried).
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn delete_nodes(&self, id: &str, nodes: &[NodeRef]) -> Result<(), ClientError> {
        let message = ca::NodeGroupDeleteNodesRequest {
            nodes: nodes.iter().map(Into::into).collect(),
            id: id.to_owned(),
        };
        self.unary("NodeGroupDeleteNodes", false, message, |r| {
            let mut c = self.ca.clone();
            async move { c.node_group_delete_nodes(r).await }
        })
        .await
        .map(drop)
    }

    /// Shrink a group's target by `-delta` (delta < 0; not retried).
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn decrease_target_size(&self, id: &str, delta: i32) -> Result<(), ClientError> {
        let message = ca::NodeGroupDecreaseTargetSizeRequest {
            delta,
            id: id.to_owned(),
        };
        self.unary("NodeGroupDecreaseTargetSize", false, message, |r| {
            let mut c = self.ca.clone();
            async move { c.node_group_decrease_target_size(r).await }
        })
        .await
        .map(drop)
    }

    /// Instances of a group.
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn nodes(&self, id: &str) -> Result<Vec<Instance>, ClientError> {
        let message = ca::NodeGroupNodesRequest { id: id.to_owned() };
        let response = self
            .unary("NodeGroupNodes", true, message, |r| {
                let mut c = self.ca.clone();
                async move { c.node_group_nodes(r).await }
            })
            .await?;
        Ok(response.instances.into_iter().map(Into::into).collect())
    }

    /// The template Node over plain externalgrpc (`NodeGroupTemplateNodeInfo`): `nodeBytes`
    /// (field 2, CA >= 1.35) first, else the <= 1.34 field 1. No ResourceSlices.
    ///
    /// # Errors
    /// [`ClientError`] with the call's category; `Decode` for unreadable node bytes.
    pub async fn template_node_info(&self, id: &str) -> Result<TemplateNode, ClientError> {
        const METHOD: &str = "NodeGroupTemplateNodeInfo";
        let message = ca::NodeGroupTemplateNodeInfoRequest { id: id.to_owned() };
        let response = self
            .unary(METHOD, true, message, |r| {
                let mut c = self.ca.clone();
                async move { c.node_group_template_node_info(r).await }
            })
            .await?;
        let bytes = if response.node_bytes.is_empty() {
            &response.legacy_node_info
        } else {
            &response.node_bytes
        };
        if bytes.is_empty() {
            return Err(ClientError::Decode {
                method: METHOD,
                field: "nodeBytes",
                reason: "empty".to_owned(),
            });
        }
        let node = decode_node(bytes).map_err(|err| ClientError::Decode {
            method: METHOD,
            field: "nodeBytes",
            reason: err.to_string(),
        })?;
        if !response.resource_slice_bytes.is_empty() {
            tracing::warn!(
                group = id,
                slices = response.resource_slice_bytes.len(),
                "provider sent ResourceSlices as Kubernetes protobuf, which this client cannot decode; \
                 use NodeGroupExtensions for DRA templates"
            );
        }
        Ok(TemplateNode {
            node,
            resource_slices: Vec::new(),
        })
    }

    /// Per-group options; `None` when the provider says "use the defaults".
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn options(
        &self,
        id: &str,
        defaults: &AutoscalingOptions,
    ) -> Result<Option<AutoscalingOptions>, ClientError> {
        let message = ca::NodeGroupAutoscalingOptionsRequest {
            id: id.to_owned(),
            defaults: Some(options_to_pb(defaults, false)),
        };
        let response = self
            .unary("NodeGroupGetOptions", true, message, |r| {
                let mut c = self.ca.clone();
                async move { c.node_group_get_options(r).await }
            })
            .await?;
        Ok(response
            .node_group_autoscaling_options
            .as_ref()
            .map(options_from_pb))
    }

    /// Whether the provider serves `NodeGroupExtensions`. Probed once with `NodeGroupInfos`;
    /// when missing, logs which features are unavailable.
    ///
    /// # Errors
    /// A failure of the probe other than UNIMPLEMENTED.
    pub async fn extensions_available(&self) -> Result<bool, ClientError> {
        match self.extensions.load(Ordering::Relaxed) {
            EXT_PRESENT => return Ok(true),
            EXT_MISSING => return Ok(false),
            _ => {}
        }
        match self.infos(Vec::new()).await {
            Ok(_) => Ok(true),
            Err(ClientError::ExtensionUnavailable { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    fn mark_missing(&self) {
        if self.extensions.swap(EXT_MISSING, Ordering::Relaxed) != EXT_MISSING {
            tracing::warn!(
                endpoint = %self.config.endpoint,
                "provider does not serve draautoscaler.provider.v1.NodeGroupExtensions; falling back to plain \
                 externalgrpc. Unavailable: {FEATURES_NEEDING_EXTENSIONS}"
            );
        }
    }

    async fn infos(&self, ids: Vec<String>) -> Result<Vec<ext::NodeGroupInfo>, ClientError> {
        let result = self
            .unary(
                "NodeGroupInfos",
                true,
                ext::NodeGroupInfosRequest { ids },
                |r| {
                    let mut c = self.ext.clone();
                    async move { c.node_group_infos(r).await }
                },
            )
            .await;
        match result {
            Ok(response) => {
                self.extensions.store(EXT_PRESENT, Ordering::Relaxed);
                Ok(response.node_groups)
            }
            Err(ClientError::Rpc { status, .. }) if status.code() == Code::Unimplemented => {
                self.mark_missing();
                Err(ClientError::ExtensionUnavailable {
                    feature: "node group details",
                })
            }
            Err(err) => Err(err),
        }
    }

    /// Full details of the named groups (all when `ids` is empty), from the extension.
    ///
    /// # Errors
    /// `ExtensionUnavailable` (category `NotImplemented`) without the extension; `Decode` for
    /// unreadable Kubernetes JSON; otherwise the call's category.
    pub async fn node_group_details(
        &self,
        ids: &[String],
    ) -> Result<Vec<NodeGroupDetails>, ClientError> {
        self.infos(ids.to_vec())
            .await?
            .into_iter()
            .map(|info| {
                details_from_pb(info).map_err(|err| ClientError::Decode {
                    method: "NodeGroupInfos",
                    field: err.what,
                    reason: err.source.to_string(),
                })
            })
            .collect()
    }

    /// The best template available: the extension's (Node + ResourceSlices) when served, else
    /// externalgrpc's Node alone.
    ///
    /// # Errors
    /// [`ClientError`] with the call's category.
    pub async fn template(&self, id: &str) -> Result<TemplateNode, ClientError> {
        if self.extensions_available().await? {
            let mut details = self.node_group_details(&[id.to_owned()]).await?;
            if let Some(position) = details.iter().position(|d| d.id == id) {
                return Ok(details.swap_remove(position).template);
            }
        }
        self.template_node_info(id).await
    }

    /// Start between `min_count` and `count` instances together, or none (not retried here;
    /// retry with the same `request_id` to stay idempotent).
    ///
    /// # Errors
    /// `OutOfCapacity`/`Quota` category when the provider could not start `min_count`
    /// ([`ClientError::error_class`] tells which); `NotImplemented` without the extension.
    pub async fn atomic_increase_size(
        &self,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ClientError> {
        if self.extensions.load(Ordering::Relaxed) == EXT_MISSING {
            return Err(ClientError::ExtensionUnavailable {
                feature: "atomic (gang) scale-up",
            });
        }
        let message = ext::AtomicIncreaseSizeRequest {
            id: request.id.clone(),
            count: request.count,
            min_count: request.min_count,
            request_id: request.request_id.clone(),
        };
        let result = self
            .unary("AtomicIncreaseSize", false, message, |r| {
                let mut c = self.ext.clone();
                async move { c.atomic_increase_size(r).await }
            })
            .await;
        match result {
            Ok(response) => Ok(response.instance_ids),
            Err(ClientError::Rpc { status, .. }) if status.code() == Code::Unimplemented => {
                Err(ClientError::ExtensionUnavailable {
                    feature: "atomic (gang) scale-up",
                })
            }
            Err(err) => Err(err),
        }
    }

    /// Instances with error class and reservation, from the extension.
    ///
    /// # Errors
    /// `NotImplemented` category without the extension; otherwise the call's category.
    pub async fn instance_details(&self, id: &str) -> Result<Vec<InstanceDetails>, ClientError> {
        let message = ext::InstanceStatusesRequest { id: id.to_owned() };
        let result = self
            .unary("InstanceStatuses", true, message, |r| {
                let mut c = self.ext.clone();
                async move { c.instance_statuses(r).await }
            })
            .await;
        match result {
            Ok(response) => Ok(response.instances.into_iter().map(Into::into).collect()),
            Err(ClientError::Rpc { status, .. }) if status.code() == Code::Unimplemented => {
                Err(ClientError::ExtensionUnavailable {
                    feature: "instance error classes and reservations",
                })
            }
            Err(err) => Err(err),
        }
    }
}
