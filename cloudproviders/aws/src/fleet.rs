//! A gang start with EC2 Fleet `instant`: at least `minCount` instances of one type in one zone,
//! or none (`OnDemandOptions.MinTargetCapacity` with `SingleInstanceType` and
//! `SingleAvailabilityZone`). Capacity Blocks cannot use that (they launch what fits), so for
//! them the caller checks `AvailableInstanceCount` first and rolls back a short launch.

use aws_sdk_ec2::operation::create_fleet::CreateFleetOutput;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest,
    FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest, FleetType,
    InstanceType, OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest,
    Tag, TagSpecification, TargetCapacitySpecificationRequest,
};
use dra_api::CapacityType;
use dra_provider::ProviderError;

use crate::aws::{Aws, sdk_error};

/// Tag on every instance we launch: the node group (ASG) it is for.
pub const GROUP_TAG: &str = "dra-autoscaler.io/node-group";
/// Tag on every instance we launch: the request that started it.
pub const REQUEST_TAG: &str = "dra-autoscaler.io/request-id";

/// One launch.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRequest {
    /// ASG name (for tags).
    pub group: String,
    /// Launch template id.
    pub launch_template_id: String,
    /// Launch template version.
    pub launch_template_version: String,
    /// Instance type.
    pub instance_type: String,
    /// (subnet, zone) candidates; the fleet picks one zone.
    pub subnets: Vec<(String, String)>,
    /// Instances wanted.
    pub count: i32,
    /// Fewest that make the start worthwhile.
    pub min_count: i32,
    /// How they are bought.
    pub capacity: Capacity,
    /// Our request id (tag and idempotency token source).
    pub request_id: String,
}

/// The market a launch goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    /// On-demand (also ODCRs, which the launch template targets).
    OnDemand,
    /// Spot.
    Spot,
    /// A Capacity Block (the launch template targets it).
    CapacityBlock,
}

impl Capacity {
    /// The market of a group.
    #[must_use]
    pub fn of(capacity_type: CapacityType, capacity_block: bool) -> Self {
        match capacity_type {
            CapacityType::Reserved if capacity_block => Self::CapacityBlock,
            CapacityType::Spot => Self::Spot,
            _ => Self::OnDemand,
        }
    }
}

/// A launch's result.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FleetOutcome {
    /// (instance id, zone) launched.
    pub instances: Vec<(String, String)>,
    /// (code, message, instance type, zone) of what could not be launched.
    pub errors: Vec<(String, String, String, String)>,
}

/// `ClientToken` from our request id: at most 64 ASCII characters, so long ids are hashed
/// (FNV-1a, stable across restarts and builds).
#[must_use]
pub fn client_token(group: &str, request_id: &str) -> String {
    let raw = format!("{group}/{request_id}");
    if raw.len() <= 64 && raw.is_ascii() {
        return raw;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in raw.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let prefix: String = request_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(40)
        .collect();
    format!("{prefix}-{hash:016x}")
}

fn tags(request: &FleetRequest) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(ResourceType::Instance)
        .tags(Tag::builder().key(GROUP_TAG).value(&request.group).build())
        .tags(
            Tag::builder()
                .key(REQUEST_TAG)
                .value(&request.request_id)
                .build(),
        )
        .build()
}

/// Reads a CreateFleet answer: launched instances with their zones, and the errors.
#[must_use]
pub fn outcome(reply: &CreateFleetOutput) -> FleetOutcome {
    let overrides = |lto: Option<&aws_sdk_ec2::types::LaunchTemplateAndOverridesResponse>| {
        let o = lto.and_then(|l| l.overrides());
        (
            o.and_then(|o| o.instance_type())
                .map(|t| t.as_str().to_owned())
                .unwrap_or_default(),
            o.and_then(|o| o.availability_zone())
                .map(ToOwned::to_owned)
                .unwrap_or_default(),
        )
    };
    FleetOutcome {
        instances: reply
            .instances()
            .iter()
            .flat_map(|i| {
                let (_, zone) = overrides(i.launch_template_and_overrides());
                i.instance_ids()
                    .iter()
                    .map(move |id| (id.clone(), zone.clone()))
            })
            .collect(),
        errors: reply
            .errors()
            .iter()
            .map(|e| {
                let (instance_type, zone) = overrides(e.launch_template_and_overrides());
                (
                    e.error_code().unwrap_or_default().to_owned(),
                    e.error_message().unwrap_or_default().to_owned(),
                    instance_type,
                    zone,
                )
            })
            .collect(),
    }
}

/// Sends one `CreateFleet` `instant` call (the SDK retries throttling with the same token).
///
/// # Errors
/// The API's error (a 200 with no instances is not an error here; see [`FleetOutcome`]).
pub async fn create_fleet(
    aws: &Aws,
    request: &FleetRequest,
) -> Result<FleetOutcome, ProviderError> {
    let mut overrides = FleetLaunchTemplateConfigRequest::builder().launch_template_specification(
        FleetLaunchTemplateSpecificationRequest::builder()
            .launch_template_id(&request.launch_template_id)
            .version(&request.launch_template_version)
            .build(),
    );
    for (subnet, zone) in &request.subnets {
        overrides = overrides.overrides(
            FleetLaunchTemplateOverridesRequest::builder()
                .instance_type(InstanceType::from(request.instance_type.as_str()))
                .subnet_id(subnet)
                .availability_zone(zone)
                .build(),
        );
    }
    let (default_type, on_demand) = match request.capacity {
        Capacity::OnDemand => (DefaultTargetCapacityType::OnDemand, request.count),
        Capacity::Spot => (DefaultTargetCapacityType::Spot, 0),
        Capacity::CapacityBlock => (DefaultTargetCapacityType::CapacityBlock, 0),
    };
    let mut call = aws
        .ec2
        .create_fleet()
        .r#type(FleetType::Instant)
        .client_token(client_token(&request.group, &request.request_id))
        .launch_template_configs(overrides.build())
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(request.count)
                .on_demand_target_capacity(on_demand)
                .spot_target_capacity(if request.capacity == Capacity::Spot {
                    request.count
                } else {
                    0
                })
                .default_target_capacity_type(default_type)
                .build(),
        )
        .tag_specifications(tags(request));
    match request.capacity {
        Capacity::OnDemand => {
            call = call.on_demand_options(
                OnDemandOptionsRequest::builder()
                    .min_target_capacity(request.min_count)
                    .single_instance_type(true)
                    .single_availability_zone(true)
                    .build(),
            );
        }
        Capacity::Spot => {
            call = call.spot_options(
                SpotOptionsRequest::builder()
                    .allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized)
                    .min_target_capacity(request.min_count)
                    .single_instance_type(true)
                    .single_availability_zone(true)
                    .build(),
            );
        }
        // Capacity Blocks: no OnDemandOptions (what Karpenter sends); MinTargetCapacity is not
        // documented for them, so the caller pre-checks and rolls back instead.
        Capacity::CapacityBlock => {}
    }
    let reply = call
        .send()
        .await
        .map_err(|e| sdk_error("CreateFleet", &e))?;
    Ok(outcome(&reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_tokens_are_stable_and_short() {
        assert_eq!(client_token("gpu", "abc"), "gpu/abc");
        let long = "x".repeat(100);
        let token = client_token("gpu", &long);
        assert!(token.len() <= 64, "{token}");
        assert_eq!(token, client_token("gpu", &long));
        assert_ne!(token, client_token("gpu2", &long));
    }
}
