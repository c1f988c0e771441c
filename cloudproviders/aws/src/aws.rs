//! The AWS SDK clients and the few calls we make, each turned into a plain value or a
//! [`ProviderError`] with the AWS error code kept (so it can be classified).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_sdk_autoscaling as asg;
use aws_sdk_ec2 as ec2;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use dra_provider::ProviderError;

use crate::errors::api_error;

/// The two clients and the region they talk to.
#[derive(Debug, Clone)]
pub struct Aws {
    /// EC2.
    pub ec2: ec2::Client,
    /// Auto Scaling.
    pub autoscaling: asg::Client,
    /// Region (for the region label).
    pub region: String,
}

/// HTTPS (and plain HTTP, for emulators) client on rustls + ring, the TLS stack the rest of the
/// workspace uses; the SDK's default would compile aws-lc.
#[must_use]
pub fn http_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    aws_smithy_http_client::Builder::new()
        .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
            aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https()
}

/// Retries: the SDK's standard mode (exponential backoff with jitter, throttling codes
/// included), with more attempts than its default of 3 because Auto Scaling and EC2 throttle
/// per account.
#[must_use]
pub fn retry_config(
    max_attempts: u32,
    initial_backoff: Duration,
) -> aws_config::retry::RetryConfig {
    aws_config::retry::RetryConfig::standard()
        .with_max_attempts(max_attempts)
        .with_initial_backoff(initial_backoff)
}

/// Where the SDK's default credential chain looks, in its order (for the error when it
/// finds nothing).
pub const CREDENTIAL_CHAIN: &str = "environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY), \
    shared config and credentials files (AWS_PROFILE), web identity token (IRSA: \
    AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN), container credentials (EKS Pod Identity, \
    ECS), EC2 instance metadata (IMDS)";

impl Aws {
    /// Clients from the SDK's default chain (environment, IRSA web identity, EKS Pod Identity,
    /// instance profile, ...). `endpoint` overrides the service endpoints (for an emulator).
    ///
    /// # Errors
    /// [`ProviderError::Misconfigured`] when no region is given and the SDK's chain finds
    /// none: every call would fail, so say it once, with the flag that fixes it.
    pub async fn from_env(
        region: Option<String>,
        endpoint: Option<String>,
    ) -> Result<Self, ProviderError> {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http_client())
            .retry_config(retry_config(8, Duration::from_millis(200)));
        if let Some(region) = region {
            loader = loader.region(aws_config::Region::new(region));
        }
        if let Some(endpoint) = endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        let config = loader.load().await;
        if config.region().is_none() {
            return Err(ProviderError::Misconfigured {
                message: "no AWS region: pass --region (or DRA_AWS_REGION) or set AWS_REGION; \
                    the SDK's chain (AWS_REGION, AWS_DEFAULT_REGION, the profile, instance \
                    metadata) found none"
                    .to_owned(),
            });
        }
        Ok(Self::from_sdk_config(&config))
    }

    /// Clients from a loaded SDK config.
    #[must_use]
    pub fn from_sdk_config(config: &aws_config::SdkConfig) -> Self {
        Self {
            ec2: ec2::Client::new(config),
            autoscaling: asg::Client::new(config),
            region: config.region().map(ToString::to_string).unwrap_or_default(),
        }
    }
}

/// Turns an SDK error into a [`ProviderError`] of one line, cause first: a service error
/// classified by its AWS code (access and credential codes are misconfiguration, with a
/// hint); no credentials, the chain that was tried; an endpoint that cannot be reached,
/// transient.
pub fn sdk_error<E, R>(
    action: &str,
    err: &aws_smithy_runtime_api::client::result::SdkError<E, R>,
) -> ProviderError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug + 'static,
{
    use aws_smithy_runtime_api::client::result::SdkError;
    if let Some(credentials) = credentials_error(err) {
        return credentials_problem(action, credentials);
    }
    let chain = one_line(err);
    match err {
        SdkError::ServiceError(_) => {
            let message = err.message().map_or_else(|| chain.clone(), one_line_text);
            match err.code() {
                Some(code) if is_access_code(code) => ProviderError::Misconfigured {
                    message: format!(
                        "{action}: {code}: {message} (the provider's IAM role needs the \
                         README's policy, and its credentials must be valid)"
                    ),
                },
                code => api_error(action, code, &message),
            }
        }
        SdkError::DispatchFailure(failure) => {
            let what = if failure.is_timeout() {
                "the endpoint did not answer in time"
            } else if failure.is_io() {
                "the endpoint cannot be reached"
            } else {
                "the request could not be sent"
            };
            ProviderError::Unavailable {
                message: format!("{action}: {what}: {chain}"),
            }
        }
        SdkError::TimeoutError(_) => ProviderError::Unavailable {
            message: format!("{action}: no answer in time: {chain}"),
        },
        SdkError::ResponseError(_) => ProviderError::Unavailable {
            message: format!("{action}: the answer could not be read: {chain}"),
        },
        SdkError::ConstructionFailure(_) => ProviderError::Misconfigured {
            message: format!("{action}: the request could not be built: {chain}"),
        },
        _ => ProviderError::Internal {
            message: format!("{action}: {chain}"),
        },
    }
}

/// AWS error codes that mean the credentials or their permissions are wrong.
fn is_access_code(code: &str) -> bool {
    matches!(
        code,
        "AccessDenied"
            | "AccessDeniedException"
            | "UnauthorizedOperation"
            | "AuthFailure"
            | "InvalidClientTokenId"
            | "ExpiredToken"
            | "ExpiredTokenException"
            | "SignatureDoesNotMatch"
            | "UnrecognizedClientException"
            | "OptInRequired"
    )
}

/// The credentials error somewhere in `err`'s sources, if the call failed for want of them.
fn credentials_error<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a aws_credential_types::provider::error::CredentialsError> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(error) = source {
        if let Some(found) =
            error.downcast_ref::<aws_credential_types::provider::error::CredentialsError>()
        {
            return Some(found);
        }
        source = error.source();
    }
    None
}

fn credentials_problem(
    action: &str,
    err: &aws_credential_types::provider::error::CredentialsError,
) -> ProviderError {
    use aws_credential_types::provider::error::CredentialsError;
    let chain = one_line(err);
    match err {
        CredentialsError::CredentialsNotLoaded(_) => ProviderError::Misconfigured {
            message: format!(
                "{action}: no AWS credentials: the SDK's default chain found none (tried: \
                 {CREDENTIAL_CHAIN}): {chain}"
            ),
        },
        CredentialsError::ProviderTimedOut(_) => ProviderError::Unavailable {
            message: format!("{action}: loading AWS credentials timed out: {chain}"),
        },
        _ => ProviderError::Misconfigured {
            message: format!("{action}: AWS credentials could not be loaded: {chain}"),
        },
    }
}

/// An error and its sources as one line, each cause once (`a: b: c`), never a Debug dump.
#[must_use]
pub fn one_line(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(error) = source {
        let text = one_line_text(&error.to_string());
        // Layers often repeat their source's text; keep what each adds.
        if !text.is_empty() && !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
        source = error.source();
    }
    parts.join(": ")
}

fn one_line_text(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One instance of an Auto Scaling group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsgInstance {
    /// `i-…`.
    pub id: String,
    /// Its zone.
    pub zone: String,
    /// Auto Scaling lifecycle state (`Pending`, `InService`, `Terminating`, ...).
    pub lifecycle: String,
}

/// The launch template an ASG uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LaunchTemplateRef {
    /// `lt-…`.
    pub id: Option<String>,
    /// Name.
    pub name: Option<String>,
    /// Version (`$Default`, `$Latest` or a number).
    pub version: Option<String>,
}

/// What we need of an Auto Scaling group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AsgInfo {
    /// Name.
    pub name: String,
    /// MinSize.
    pub min_size: i32,
    /// MaxSize.
    pub max_size: i32,
    /// DesiredCapacity.
    pub desired: i32,
    /// Instances.
    pub instances: Vec<AsgInstance>,
    /// Availability zones.
    pub zones: Vec<String>,
    /// Subnets (VPCZoneIdentifier).
    pub subnets: Vec<String>,
    /// Launch template (directly or in the mixed instances policy).
    pub launch_template: Option<LaunchTemplateRef>,
    /// Instance types of the mixed instances policy's overrides, in order.
    pub override_types: Vec<String>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
}

fn group_info(g: &asg::types::AutoScalingGroup) -> AsgInfo {
    let mixed = g.mixed_instances_policy().and_then(|p| p.launch_template());
    let lt = g.launch_template().cloned().or_else(|| {
        mixed
            .and_then(|m| m.launch_template_specification())
            .cloned()
    });
    AsgInfo {
        name: g.auto_scaling_group_name().unwrap_or_default().to_owned(),
        min_size: g.min_size().unwrap_or(0),
        max_size: g.max_size().unwrap_or(0),
        desired: g.desired_capacity().unwrap_or(0),
        instances: g
            .instances()
            .iter()
            .map(|i| AsgInstance {
                id: i.instance_id().unwrap_or_default().to_owned(),
                zone: i.availability_zone().unwrap_or_default().to_owned(),
                lifecycle: i
                    .lifecycle_state()
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_default(),
            })
            .collect(),
        zones: g.availability_zones().to_vec(),
        subnets: g
            .vpc_zone_identifier()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(ToOwned::to_owned)
            .collect(),
        launch_template: lt.map(|lt| LaunchTemplateRef {
            id: lt.launch_template_id().map(ToOwned::to_owned),
            name: lt.launch_template_name().map(ToOwned::to_owned),
            version: lt.version().map(ToOwned::to_owned),
        }),
        override_types: mixed
            .map(|m| {
                m.overrides()
                    .iter()
                    .filter_map(|o| o.instance_type().map(ToOwned::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        tags: g
            .tags()
            .iter()
            .filter_map(|t| {
                Some((
                    t.key()?.to_owned(),
                    t.value().unwrap_or_default().to_owned(),
                ))
            })
            .collect(),
    }
}

/// cluster-autoscaler's discovery filters: `key` → `tag-key`, `key=value` → `tag:key`; all of
/// them must match (Auto Scaling ANDs filters).
#[must_use]
pub fn discovery_filters(tags: &[String]) -> Vec<asg::types::Filter> {
    tags.iter()
        .map(|tag| match tag.split_once('=') {
            Some((key, value)) => asg::types::Filter::builder()
                .name(format!("tag:{key}"))
                .values(value)
                .build(),
            None => asg::types::Filter::builder()
                .name("tag-key")
                .values(tag)
                .build(),
        })
        .collect()
}

impl Aws {
    /// Groups matching the discovery `tags` plus the groups named in `names`.
    ///
    /// # Errors
    /// The API's error.
    pub async fn describe_groups(
        &self,
        tags: &[String],
        names: &[String],
    ) -> Result<Vec<AsgInfo>, ProviderError> {
        let mut out: BTreeMap<String, AsgInfo> = BTreeMap::new();
        let mut queries = Vec::new();
        if !tags.is_empty() {
            queries.push(
                self.autoscaling
                    .describe_auto_scaling_groups()
                    .set_filters(Some(discovery_filters(tags))),
            );
        }
        // At most 100 names per call (MaxRecords); the config lists a handful.
        for chunk in names.chunks(50) {
            queries.push(
                self.autoscaling
                    .describe_auto_scaling_groups()
                    .set_auto_scaling_group_names(Some(chunk.to_vec())),
            );
        }
        for query in queries {
            let mut pages = query.into_paginator().send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| sdk_error("DescribeAutoScalingGroups", &e))?;
                for g in page.auto_scaling_groups() {
                    let info = group_info(g);
                    out.insert(info.name.clone(), info);
                }
            }
        }
        Ok(out.into_values().collect())
    }

    /// Sets the desired capacity (cluster-autoscaler's call: cooldown not honoured).
    ///
    /// # Errors
    /// The API's error.
    pub async fn set_desired(&self, group: &str, desired: i32) -> Result<(), ProviderError> {
        self.autoscaling
            .set_desired_capacity()
            .auto_scaling_group_name(group)
            .desired_capacity(desired)
            .honor_cooldown(false)
            .send()
            .await
            .map_err(|e| sdk_error("SetDesiredCapacity", &e))?;
        Ok(())
    }

    /// Terminates one instance of its group and shrinks the group with it.
    ///
    /// # Errors
    /// The API's error.
    pub async fn terminate_in_group(&self, instance: &str) -> Result<(), ProviderError> {
        self.autoscaling
            .terminate_instance_in_auto_scaling_group()
            .instance_id(instance)
            .should_decrement_desired_capacity(true)
            .send()
            .await
            .map_err(|e| sdk_error("TerminateInstanceInAutoScalingGroup", &e))?;
        Ok(())
    }

    /// Attaches running instances to a group (its desired capacity grows with them).
    ///
    /// # Errors
    /// The API's error.
    pub async fn attach(&self, group: &str, instances: &[String]) -> Result<(), ProviderError> {
        // AttachInstances takes at most 20 ids per call.
        for chunk in instances.chunks(20) {
            self.autoscaling
                .attach_instances()
                .auto_scaling_group_name(group)
                .set_instance_ids(Some(chunk.to_vec()))
                .send()
                .await
                .map_err(|e| sdk_error("AttachInstances", &e))?;
        }
        Ok(())
    }

    /// Terminates instances outside any group bookkeeping (rollback of a partial launch).
    ///
    /// # Errors
    /// The API's error.
    pub async fn terminate(&self, instances: &[String]) -> Result<(), ProviderError> {
        if instances.is_empty() {
            return Ok(());
        }
        self.ec2
            .terminate_instances()
            .set_instance_ids(Some(instances.to_vec()))
            .send()
            .await
            .map_err(|e| sdk_error("TerminateInstances", &e))?;
        Ok(())
    }

    /// EC2 state name (`pending`, `running`, ...) of each instance found.
    ///
    /// # Errors
    /// The API's error.
    pub async fn instance_states(
        &self,
        instances: &[String],
    ) -> Result<BTreeMap<String, String>, ProviderError> {
        let mut out = BTreeMap::new();
        if instances.is_empty() {
            return Ok(out);
        }
        let reply = self
            .ec2
            .describe_instances()
            .set_instance_ids(Some(instances.to_vec()))
            .send()
            .await
            .map_err(|e| sdk_error("DescribeInstances", &e))?;
        for r in reply.reservations() {
            for i in r.instances() {
                if let (Some(id), Some(state)) = (i.instance_id(), i.state().and_then(|s| s.name()))
                {
                    out.insert(id.to_owned(), state.as_str().to_owned());
                }
            }
        }
        Ok(out)
    }

    /// Zone of each subnet.
    ///
    /// # Errors
    /// The API's error.
    pub async fn subnet_zones(
        &self,
        subnets: &[String],
    ) -> Result<BTreeMap<String, String>, ProviderError> {
        if subnets.is_empty() {
            return Ok(BTreeMap::new());
        }
        let reply = self
            .ec2
            .describe_subnets()
            .set_subnet_ids(Some(subnets.to_vec()))
            .send()
            .await
            .map_err(|e| sdk_error("DescribeSubnets", &e))?;
        Ok(reply
            .subnets()
            .iter()
            .filter_map(|s| Some((s.subnet_id()?.to_owned(), s.availability_zone()?.to_owned())))
            .collect())
    }
}

/// What a launch template says about the machines it starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LaunchTemplateInfo {
    /// Its id.
    pub id: Option<String>,
    /// The version the group uses, resolved.
    pub version: Option<String>,
    /// Instance type.
    pub instance_type: Option<String>,
    /// Size of the first EBS volume (the root volume) in GiB.
    pub root_volume_gib: Option<u64>,
    /// `CapacityReservationSpecification.CapacityReservationPreference`.
    pub reservation_preference: Option<String>,
    /// `CapacityReservationTarget.CapacityReservationId`.
    pub reservation_target: Option<String>,
    /// `InstanceMarketOptions.MarketType` (`spot`, `capacity-block`).
    pub market_type: Option<String>,
}

impl Aws {
    /// The launch template version a group uses.
    ///
    /// # Errors
    /// The API's error.
    pub async fn launch_template(
        &self,
        lt: &LaunchTemplateRef,
    ) -> Result<LaunchTemplateInfo, ProviderError> {
        let version = lt.version.clone().unwrap_or_else(|| "$Default".to_owned());
        let reply = self
            .ec2
            .describe_launch_template_versions()
            .set_launch_template_id(lt.id.clone())
            .set_launch_template_name(if lt.id.is_some() {
                None
            } else {
                lt.name.clone()
            })
            .versions(version)
            .send()
            .await
            .map_err(|e| sdk_error("DescribeLaunchTemplateVersions", &e))?;
        let Some(v) = reply.launch_template_versions().first() else {
            return Err(ProviderError::NotFound {
                what: format!("launch template {lt:?}"),
            });
        };
        let data = v.launch_template_data();
        Ok(LaunchTemplateInfo {
            id: v.launch_template_id().map(ToOwned::to_owned),
            version: v.version_number().map(|n| n.to_string()),
            instance_type: data
                .and_then(|d| d.instance_type())
                .map(|t| t.as_str().to_owned()),
            root_volume_gib: data
                .and_then(|d| d.block_device_mappings().first())
                .and_then(|b| b.ebs())
                .and_then(|e| e.volume_size())
                .and_then(|s| u64::try_from(s).ok()),
            reservation_preference: data
                .and_then(|d| d.capacity_reservation_specification())
                .and_then(|c| c.capacity_reservation_preference())
                .map(|p| p.as_str().to_owned()),
            reservation_target: data
                .and_then(|d| d.capacity_reservation_specification())
                .and_then(|c| c.capacity_reservation_target())
                .and_then(|t| t.capacity_reservation_id())
                .map(ToOwned::to_owned),
            market_type: data
                .and_then(|d| d.instance_market_options())
                .and_then(|m| m.market_type())
                .map(|m| m.as_str().to_owned()),
        })
    }
}

/// A capacity reservation (ODCR or Capacity Block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservationInfo {
    /// `cr-…`.
    pub id: String,
    /// Instance type it holds.
    pub instance_type: String,
    /// Its zone.
    pub zone: String,
    /// Instances it holds.
    pub total: i32,
    /// Instances that can still be launched into it.
    pub available: i32,
    /// When it ends; `None` for open-ended ODCRs.
    pub end: Option<SystemTime>,
    /// A Capacity Block for ML (never falls back, fills partly).
    pub capacity_block: bool,
    /// State (`active`, `scheduled`, `expired`, ...).
    pub state: String,
}

impl Aws {
    /// The named reservations.
    ///
    /// # Errors
    /// The API's error.
    pub async fn reservations(
        &self,
        ids: &[String],
    ) -> Result<Vec<ReservationInfo>, ProviderError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let reply = self
            .ec2
            .describe_capacity_reservations()
            .set_capacity_reservation_ids(Some(ids.to_vec()))
            .send()
            .await
            .map_err(|e| sdk_error("DescribeCapacityReservations", &e))?;
        Ok(reply
            .capacity_reservations()
            .iter()
            .map(|r| ReservationInfo {
                id: r.capacity_reservation_id().unwrap_or_default().to_owned(),
                instance_type: r.instance_type().unwrap_or_default().to_owned(),
                zone: r.availability_zone().unwrap_or_default().to_owned(),
                total: r.total_instance_count().unwrap_or(0),
                available: r.available_instance_count().unwrap_or(0),
                end: r.end_date().and_then(|d| SystemTime::try_from(*d).ok()),
                capacity_block: r.reservation_type().map(|t| t.as_str()) == Some("capacity-block"),
                state: r.state().map(|s| s.as_str().to_owned()).unwrap_or_default(),
            })
            .collect())
    }
}

/// `spec.providerID` of an EC2 instance on EKS: `aws:///<zone>/<instance-id>`.
#[must_use]
pub fn provider_id(zone: &str, instance: &str) -> String {
    format!("aws:///{zone}/{instance}")
}

/// The instance id in a providerID (`aws:///zone/i-…` or a bare `i-…`).
#[must_use]
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let id = provider_id.rsplit('/').next()?;
    id.starts_with("i-").then_some(id)
}
