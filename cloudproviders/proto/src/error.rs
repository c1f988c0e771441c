//! Errors on both sides of the wire.
//!
//! A provider returns [`ProviderError`]; the server harness turns it into a gRPC status (with a
//! [`ScaleUpError`](crate::pb::extensions::ScaleUpError) detail for capacity and quota
//! failures). The client turns any status back into [`ClientError`], whose
//! [`category`](ClientError::category) is what the planner acts on.
//!
//! Details travel as gRPC's richer error model: the `grpc-status-details-bin` trailer holds a
//! `google.rpc.Status` whose code and message are the status's own and whose details are
//! `google.protobuf.Any`s. grpc-go (so cluster-autoscaler) parses that trailer as a
//! `google.rpc.Status` and turns a parseable one whose code differs from `grpc-status` into
//! INTERNAL "grpc-status-details-bin mismatch"; a bare message there would be read that way.

use std::time::Duration;

use prost::Message;
use tonic::{Code, Status};
use tonic_types::Status as RpcStatus;

use crate::model::ErrorClass;
use crate::pb::extensions as ext;

/// What a provider implementation reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The named node group or node is unknown to the provider.
    #[error("{what} not found")]
    NotFound {
        /// What was looked up, e.g. `node group "gpu"`.
        what: String,
    },
    /// The cloud has no capacity; nothing (or nothing lasting) was started.
    #[error("out of capacity: {message}")]
    OutOfCapacity {
        /// Provider error code, e.g. `InsufficientInstanceCapacity`.
        code: String,
        /// Detail.
        message: String,
        /// Instances that were started and terminated again.
        rolled_back: i32,
    },
    /// A quota or limit stopped the request.
    #[error("quota exceeded: {message}")]
    Quota {
        /// Provider error code, e.g. `QUOTA_EXCEEDED`.
        code: String,
        /// Detail.
        message: String,
    },
    /// The request breaks a rule (size above max, bad delta, ...).
    #[error("invalid request: {message}")]
    InvalidArgument {
        /// Detail naming the field.
        message: String,
    },
    /// The optional method is not offered by this provider.
    #[error("{method} is not implemented by this provider")]
    NotImplemented {
        /// The method.
        method: &'static str,
    },
    /// A failure that may pass on retry (cloud API throttling, a flaky write). Whether the
    /// request took effect is not said: the client keeps what it may have started. When
    /// nothing was started, say so with [`ProviderError::NotStarted`].
    #[error("temporary failure: {message}")]
    Unavailable {
        /// Detail.
        message: String,
    },
    /// A temporary failure after which nothing of the request exists: the cloud was never
    /// asked (throttled, unreachable), or what started was rolled back. Sent as UNAVAILABLE
    /// with a [`ScaleUpError`](crate::pb::extensions::ScaleUpError) detail marked
    /// `notStarted`, so the client retries at once instead of waiting for machines.
    #[error("nothing started: {message}")]
    NotStarted {
        /// Detail.
        message: String,
    },
    /// Anything else.
    #[error("internal error: {message}")]
    Internal {
        /// Detail.
        message: String,
    },
}

impl From<ProviderError> for Status {
    fn from(err: ProviderError) -> Self {
        let message = err.to_string();
        match err {
            ProviderError::NotFound { .. } => Status::not_found(message),
            ProviderError::OutOfCapacity {
                code,
                message: detail,
                rolled_back,
            } => scale_up_status(
                ErrorClass::OutOfCapacity,
                code,
                detail,
                rolled_back,
                message,
            ),
            ProviderError::Quota {
                code,
                message: detail,
            } => scale_up_status(ErrorClass::Quota, code, detail, 0, message),
            ProviderError::InvalidArgument { .. } => Status::invalid_argument(message),
            ProviderError::NotImplemented { .. } => Status::unimplemented(message),
            ProviderError::Unavailable { .. } => Status::unavailable(message),
            ProviderError::NotStarted { message: detail } => {
                let detail = ext::ScaleUpError {
                    error_message: detail,
                    not_started: true,
                    ..Default::default()
                };
                status_with_detail(Code::Unavailable, message, &detail)
            }
            ProviderError::Internal { .. } => Status::internal(message),
        }
    }
}

fn scale_up_status(
    class: ErrorClass,
    code: String,
    detail: String,
    rolled_back: i32,
    message: String,
) -> Status {
    let detail = ext::ScaleUpError {
        error_class: crate::convert::error_class_to_pb(Some(class)).into(),
        error_code: code,
        error_message: detail,
        rolled_back,
        not_started: false,
    };
    status_with_detail(Code::ResourceExhausted, message, &detail)
}

/// `type.googleapis.com/draautoscaler.provider.v1.ScaleUpError` inside a `google.protobuf.Any`.
impl prost::Name for ext::ScaleUpError {
    const PACKAGE: &'static str = "draautoscaler.provider.v1";
    const NAME: &'static str = "ScaleUpError";

    fn type_url() -> String {
        format!("type.googleapis.com/{}", Self::full_name())
    }
}

/// A status whose `grpc-status-details-bin` trailer is the `google.rpc.Status` gRPC's richer
/// error model prescribes: the same code and message, `detail` packed as an `Any`.
fn status_with_detail(code: Code, message: String, detail: &ext::ScaleUpError) -> Status {
    let rpc_status = RpcStatus {
        code: code as i32,
        message: message.clone(),
        details: vec![prost_types::Any {
            type_url: <ext::ScaleUpError as prost::Name>::type_url(),
            value: detail.encode_to_vec(),
        }],
    };
    Status::with_details(code, message, rpc_status.encode_to_vec().into())
}

/// The [`ext::ScaleUpError`] a status carries: inside a `google.rpc.Status` (this version
/// on), or the bare message providers before it sent. The two cannot be confused: read as a
/// `google.rpc.Status`, a bare `ScaleUpError` has its error class (1, 2 or 99, or 0 when
/// unset) as the code, never the RESOURCE_EXHAUSTED (8) or UNAVAILABLE (14) it is sent with.
fn scale_up_detail(status: &Status) -> Option<ext::ScaleUpError> {
    let bytes = status.details();
    if bytes.is_empty() {
        return None;
    }
    match RpcStatus::decode(bytes) {
        Ok(rpc_status) if rpc_status.code == status.code() as i32 => {
            let wanted = <ext::ScaleUpError as prost::Name>::full_name();
            rpc_status
                .details
                .iter()
                .find(|any| any.type_url.rsplit('/').next() == Some(wanted.as_str()))
                .and_then(|any| ext::ScaleUpError::decode(any.value.as_slice()).ok())
        }
        _ => ext::ScaleUpError::decode(bytes).ok(),
    }
}

/// What a caller can do about a failed call: one enum for the client, the controller, its
/// metrics and its status messages.
///
/// For calls that change the cloud the first two tell the three outcomes apart that matter:
/// [`NotSent`](Self::NotSent) (nothing happened, retry now), [`Unknown`](Self::Unknown) (it
/// may have happened: keep what it may have started, retry only with the same request id)
/// and every other category (the provider refused: nothing started, back off).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCategory {
    /// The request never reached the provider (connection refused or reset before it was
    /// sent, DNS or TLS failure, a stream the server refused unprocessed), or the provider
    /// answered that it started nothing and keeps nothing ([`ProviderError::NotStarted`]).
    NotSent,
    /// The request may have been applied: the deadline passed after it was sent, the
    /// connection broke mid-call, or the provider failed without saying nothing started.
    Unknown,
    /// The cloud is out of capacity for this group: back off the group, try another.
    OutOfCapacity,
    /// A quota or limit was hit: back off the group until the quota changes.
    Quota,
    /// The provider does not offer the call: use a fallback, don't retry.
    NotImplemented,
    /// Our side is misconfigured (endpoint, TLS files, protocol mismatch): fix and restart.
    Config,
    /// The provider refused this request (unknown group, size out of range): don't retry as is.
    Rejected,
}

impl ErrorCategory {
    /// A bounded label for metrics.
    #[must_use]
    pub fn metric_label(self) -> &'static str {
        match self {
            Self::NotSent => "not_sent",
            Self::Unknown => "unknown",
            Self::OutOfCapacity => "out_of_capacity",
            Self::Quota => "quota",
            Self::NotImplemented => "not_implemented",
            Self::Config => "config",
            Self::Rejected => "rejected",
        }
    }

    /// A `PascalCase` reason for conditions and Events.
    #[must_use]
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotSent => "ProviderUnreachable",
            Self::Unknown => "ProviderOutcomeUnknown",
            Self::OutOfCapacity => "OutOfCapacity",
            Self::Quota => "QuotaExceeded",
            Self::NotImplemented => "NotImplemented",
            Self::Config => "ProviderConfigError",
            Self::Rejected => "ProviderRejected",
        }
    }

    /// Whether the provider refused: the request is known to have started nothing and
    /// retrying it unchanged soon will not help (every category but
    /// [`NotSent`](Self::NotSent) and [`Unknown`](Self::Unknown)).
    #[must_use]
    pub fn is_refusal(self) -> bool {
        !matches!(self, Self::NotSent | Self::Unknown)
    }
}

/// A failed call of [`ProviderClient`](crate::ProviderClient).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A TLS file could not be read.
    #[error("unable to read TLS {what} file {path}")]
    TlsFile {
        /// `CA certificate`, `client certificate` or `client key`.
        what: &'static str,
        /// The path given.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The endpoint or TLS settings are unusable.
    #[error("invalid provider endpoint {endpoint}")]
    Endpoint {
        /// The endpoint given.
        endpoint: String,
        /// Why tonic refused it.
        #[source]
        source: tonic::transport::Error,
    },
    /// The RPC failed with a gRPC status.
    #[error("provider call {method} failed with {code:?}: {message}", code = status.code(), message = status.message())]
    Rpc {
        /// Full method name.
        method: &'static str,
        /// The status as received.
        status: Status,
        /// The scale-up detail, when the provider attached one.
        scale_up: Option<ext::ScaleUpError>,
    },
    /// The call did not finish within its deadline.
    #[error("provider call {method} gave no answer within {timeout:?}")]
    Timeout {
        /// Full method name.
        method: &'static str,
        /// The per-call deadline.
        timeout: Duration,
    },
    /// The extension service is not served by this provider.
    #[error(
        "provider does not serve draautoscaler.provider.v1.NodeGroupExtensions, needed for {feature}"
    )]
    ExtensionUnavailable {
        /// The feature that needs it.
        feature: &'static str,
    },
    /// A response was malformed (missing field, undecodable Kubernetes object).
    #[error("provider call {method} returned an unusable {field}: {reason}")]
    Decode {
        /// Full method name.
        method: &'static str,
        /// The field at fault.
        field: &'static str,
        /// What was wrong.
        reason: String,
    },
}

impl ClientError {
    /// Builds an [`ClientError::Rpc`], decoding a [`ext::ScaleUpError`] detail if present
    /// (wrapped in a `google.rpc.Status`, or bare as providers before this version sent it).
    #[must_use]
    pub fn from_status(method: &'static str, status: Status) -> Self {
        let scale_up = scale_up_detail(&status);
        Self::Rpc {
            method,
            status,
            scale_up,
        }
    }

    /// The category the planner acts on.
    #[must_use]
    pub fn category(&self) -> ErrorCategory {
        match self {
            Self::TlsFile { .. } | Self::Endpoint { .. } | Self::Decode { .. } => {
                ErrorCategory::Config
            }
            // The deadline is enforced locally after the request was handed to the channel.
            Self::Timeout { .. } => ErrorCategory::Unknown,
            Self::ExtensionUnavailable { .. } => ErrorCategory::NotImplemented,
            Self::Rpc {
                status, scale_up, ..
            } => categorize(status, scale_up.as_ref()),
        }
    }

    /// The error class a scale-up failure carried, if any.
    #[must_use]
    pub fn error_class(&self) -> Option<ErrorClass> {
        match self {
            Self::Rpc {
                scale_up: Some(detail),
                ..
            } => crate::convert::error_class_from_pb(detail.error_class),
            _ => None,
        }
    }
}

fn categorize(status: &Status, scale_up: Option<&ext::ScaleUpError>) -> ErrorCategory {
    if never_sent(status) {
        return ErrorCategory::NotSent;
    }
    match status.code() {
        Code::Unavailable if scale_up.is_some_and(|d| d.not_started) => ErrorCategory::NotSent,
        // Internal is how providers report failed cloud or Kubernetes writes; they may pass,
        // and part of the request may have been applied.
        Code::Unavailable
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::Cancelled
        | Code::Unknown
        | Code::Internal => ErrorCategory::Unknown,
        Code::ResourceExhausted => {
            match scale_up.and_then(|d| crate::convert::error_class_from_pb(d.error_class)) {
                Some(ErrorClass::Quota) => ErrorCategory::Quota,
                // Without a detail, RESOURCE_EXHAUSTED from a cloud is a stockout far more often than
                // gRPC flow control, and treating it as capacity backs the group off, which is safe.
                _ => ErrorCategory::OutOfCapacity,
            }
        }
        Code::Unimplemented => ErrorCategory::NotImplemented,
        Code::Unauthenticated | Code::PermissionDenied | Code::DataLoss => ErrorCategory::Config,
        Code::NotFound
        | Code::InvalidArgument
        | Code::FailedPrecondition
        | Code::AlreadyExists
        | Code::OutOfRange
        | Code::Ok => ErrorCategory::Rejected,
    }
}

/// Whether a status raised on our side says the provider never processed the request: the
/// connection (TCP, TLS) could not be made, the peer does not speak HTTP/2 (our side ends
/// the connection with a protocol error before any stream is served: an HTTP/1.1 server, a
/// proxy's error page), or the peer refused the stream (`REFUSED_STREAM`, which HTTP/2
/// defines as "not processed"). A connection that merely breaks mid-call is not among them:
/// the provider may have acted.
fn never_sent(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<tonic::ConnectError>() {
            return true;
        }
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            let not_http2 =
                h2.is_go_away() && h2.is_library() && h2.reason() != Some(h2::Reason::NO_ERROR);
            return not_http2 || h2.reason() == Some(h2::Reason::REFUSED_STREAM);
        }
        source = error.source();
    }
    false
}

/// Whether a retry of an idempotent call may help.
pub(crate) fn is_retryable(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable | Code::DeadlineExceeded | Code::Aborted | Code::Unknown
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn out_of_capacity() -> ProviderError {
        ProviderError::OutOfCapacity {
            code: "InsufficientInstanceCapacity".into(),
            message: "no p5 in us-east-1a".into(),
            rolled_back: 2,
        }
    }

    /// gRPC's richer error model: the trailer is a google.rpc.Status with the status's own
    /// code and message and the detail as an Any named by its full type URL.
    #[test]
    fn details_are_a_google_rpc_status_with_the_same_code_and_message() {
        let status = Status::from(out_of_capacity());
        let rpc_status = RpcStatus::decode(status.details()).unwrap();
        assert_eq!(rpc_status.code, Code::ResourceExhausted as i32);
        assert_eq!(rpc_status.message, status.message());
        assert_eq!(rpc_status.details.len(), 1);
        let any = &rpc_status.details[0];
        assert_eq!(
            any.type_url,
            "type.googleapis.com/draautoscaler.provider.v1.ScaleUpError"
        );
        let detail: ext::ScaleUpError = any.to_msg().unwrap();
        assert_eq!(detail.error_code, "InsufficientInstanceCapacity");
        assert_eq!(detail.rolled_back, 2);
    }

    #[test]
    fn the_client_unwraps_what_the_server_wraps() {
        for (error, category) in [
            (out_of_capacity(), ErrorCategory::OutOfCapacity),
            (
                ProviderError::Quota {
                    code: "QUOTA_EXCEEDED".into(),
                    message: "GPUS_ALL_REGIONS".into(),
                },
                ErrorCategory::Quota,
            ),
            (
                ProviderError::NotStarted {
                    message: "throttled before any call".into(),
                },
                ErrorCategory::NotSent,
            ),
        ] {
            let client = ClientError::from_status("NodeGroupIncreaseSize", error.clone().into());
            assert_eq!(client.category(), category, "{error}");
            let ClientError::Rpc { scale_up, .. } = client else {
                panic!("an Rpc error")
            };
            assert!(scale_up.is_some(), "{error}: the detail was read");
        }
    }

    /// Providers before this version sent the ScaleUpError itself as the trailer.
    #[test]
    fn the_bare_detail_of_older_providers_is_still_read() {
        let bare = |class: ext::ErrorClass, code: Code, not_started: bool| {
            let detail = ext::ScaleUpError {
                error_class: class.into(),
                error_code: "X".into(),
                error_message: "older provider".into(),
                rolled_back: 1,
                not_started,
            };
            Status::with_details(code, "failed", detail.encode_to_vec().into())
        };
        let quota = ClientError::from_status(
            "AtomicIncreaseSize",
            bare(ext::ErrorClass::Quota, Code::ResourceExhausted, false),
        );
        assert_eq!(quota.category(), ErrorCategory::Quota);
        assert_eq!(quota.error_class(), Some(ErrorClass::Quota));
        let capacity = ClientError::from_status(
            "AtomicIncreaseSize",
            bare(
                ext::ErrorClass::OutOfCapacity,
                Code::ResourceExhausted,
                false,
            ),
        );
        assert_eq!(capacity.error_class(), Some(ErrorClass::OutOfCapacity));
        let not_started = ClientError::from_status(
            "AtomicIncreaseSize",
            bare(ext::ErrorClass::None, Code::Unavailable, true),
        );
        assert_eq!(not_started.category(), ErrorCategory::NotSent);
    }

    /// Another service's google.rpc.Status (say a proxy's ErrorInfo) is not taken for ours.
    #[test]
    fn a_google_rpc_status_without_our_detail_carries_none() {
        let rpc_status = RpcStatus {
            code: Code::Unavailable as i32,
            message: "upstream connect error".into(),
            details: vec![prost_types::Any {
                type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
                value: Vec::new(),
            }],
        };
        let status = Status::with_details(
            Code::Unavailable,
            "upstream connect error",
            rpc_status.encode_to_vec().into(),
        );
        let client = ClientError::from_status("NodeGroupIncreaseSize", status);
        let ClientError::Rpc { scale_up, .. } = &client else {
            panic!("an Rpc error")
        };
        assert!(scale_up.is_none());
        assert_eq!(client.category(), ErrorCategory::Unknown);
    }
}
