//! Paths moto cannot play (it ignores MinTargetCapacity, never fills `Errors`, has no capacity
//! reservations): scripted EC2 and Auto Scaling answers (aws-smithy-mocks), checking what the
//! provider sends and what it does with AWS's documented answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime};

use aws_config::BehaviorVersion;
use aws_credential_types::Credentials;
use aws_sdk_autoscaling::operation::describe_auto_scaling_groups::DescribeAutoScalingGroupsOutput;
use aws_sdk_autoscaling::types::{AutoScalingGroup, LaunchTemplateSpecification};
use aws_sdk_ec2::operation::create_fleet::{CreateFleetInput, CreateFleetOutput};
use aws_sdk_ec2::operation::describe_capacity_reservations::DescribeCapacityReservationsOutput;
use aws_sdk_ec2::operation::describe_instance_types::DescribeInstanceTypesOutput;
use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
use aws_sdk_ec2::operation::describe_launch_template_versions::DescribeLaunchTemplateVersionsOutput;
use aws_sdk_ec2::operation::describe_subnets::DescribeSubnetsOutput;
use aws_sdk_ec2::operation::terminate_instances::TerminateInstancesOutput;
use aws_sdk_ec2::types::{
    CapacityReservation, CapacityReservationPreference, CapacityReservationTargetResponse,
    CapacityReservationType, CreateFleetError, CreateFleetInstance, DefaultTargetCapacityType,
    FleetLaunchTemplateOverrides, FleetType, GpuDeviceInfo, GpuDeviceMemoryInfo, GpuInfo, Instance,
    InstanceState, InstanceStateName, InstanceType, InstanceTypeInfo,
    LaunchTemplateAndOverridesResponse, LaunchTemplateCapacityReservationSpecificationResponse,
    LaunchTemplateInstanceMarketOptions, LaunchTemplateVersion, MarketType, MemoryInfo,
    NetworkCardInfo, NetworkInfo, Reservation, ResponseLaunchTemplateData, Subnet, VCpuInfo,
};
use aws_smithy_mocks::{MockResponseInterceptor, Rule, RuleMode, create_mock_http_client, mock};
use dra_provider::{AtomicIncrease, CapacityType, CloudProvider, ProviderError};
use dra_provider_aws::aws::{Aws, retry_config};
use dra_provider_aws::{AwsProvider, Config};

const GROUP: &str = "gpu";
const RESERVATION: &str = "cr-0123456789abcdef0";

fn creds() -> Credentials {
    Credentials::new("testing", "testing", None, None, "scripted")
}

fn clients(ec2_rules: &[&Rule], asg_rules: &[&Rule]) -> Aws {
    let mut ec2i = MockResponseInterceptor::new().rule_mode(RuleMode::MatchAny);
    for rule in ec2_rules {
        ec2i = ec2i.with_rule(rule);
    }
    let mut asgi = MockResponseInterceptor::new().rule_mode(RuleMode::MatchAny);
    for rule in asg_rules {
        asgi = asgi.with_rule(rule);
    }
    let region = aws_config::Region::new("us-east-1");
    // Fast retries: the throttling test needs them, the others never retry.
    let retry = retry_config(4, Duration::from_millis(1));
    let ec2 = aws_sdk_ec2::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(region.clone())
        .credentials_provider(creds())
        .http_client(create_mock_http_client())
        .retry_config(retry.clone())
        .interceptor(ec2i)
        .build();
    let autoscaling = aws_sdk_autoscaling::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(region)
        .credentials_provider(creds())
        .http_client(create_mock_http_client())
        .retry_config(retry)
        .interceptor(asgi)
        .build();
    Aws {
        ec2: aws_sdk_ec2::Client::from_conf(ec2),
        autoscaling: aws_sdk_autoscaling::Client::from_conf(autoscaling),
        region: "us-east-1".into(),
    }
}

fn describe_groups() -> Rule {
    mock!(aws_sdk_autoscaling::Client::describe_auto_scaling_groups).then_output(|| {
        DescribeAutoScalingGroupsOutput::builder()
            .auto_scaling_groups(
                AutoScalingGroup::builder()
                    .auto_scaling_group_name(GROUP)
                    .min_size(0)
                    .max_size(8)
                    .desired_capacity(0)
                    .vpc_zone_identifier("subnet-a,subnet-b")
                    .launch_template(
                        LaunchTemplateSpecification::builder()
                            .launch_template_id("lt-1")
                            .version("3")
                            .build(),
                    )
                    .build(),
            )
            .build()
    })
}

fn launch_template(reserved: bool, capacity_block: bool) -> Rule {
    mock!(aws_sdk_ec2::Client::describe_launch_template_versions).then_output(move || {
        let mut data =
            ResponseLaunchTemplateData::builder().instance_type(InstanceType::P548xlarge);
        if reserved {
            data = data.capacity_reservation_specification(
                LaunchTemplateCapacityReservationSpecificationResponse::builder()
                    .capacity_reservation_preference(
                        CapacityReservationPreference::CapacityReservationsOnly,
                    )
                    .capacity_reservation_target(
                        CapacityReservationTargetResponse::builder()
                            .capacity_reservation_id(RESERVATION)
                            .build(),
                    )
                    .build(),
            );
        }
        if capacity_block {
            data = data.instance_market_options(
                LaunchTemplateInstanceMarketOptions::builder()
                    .market_type(MarketType::CapacityBlock)
                    .build(),
            );
        }
        DescribeLaunchTemplateVersionsOutput::builder()
            .launch_template_versions(
                LaunchTemplateVersion::builder()
                    .launch_template_id("lt-1")
                    .version_number(3)
                    .launch_template_data(data.build())
                    .build(),
            )
            .build()
    })
}

fn instance_types() -> Rule {
    mock!(aws_sdk_ec2::Client::describe_instance_types).then_output(|| {
        DescribeInstanceTypesOutput::builder()
            .instance_types(
                InstanceTypeInfo::builder()
                    .instance_type(InstanceType::P548xlarge)
                    .v_cpu_info(VCpuInfo::builder().default_v_cpus(192).build())
                    .memory_info(MemoryInfo::builder().size_in_mib(2_097_152).build())
                    .gpu_info(
                        GpuInfo::builder()
                            .gpus(
                                GpuDeviceInfo::builder()
                                    .name("H100")
                                    .manufacturer("NVIDIA")
                                    .count(8)
                                    .memory_info(
                                        GpuDeviceMemoryInfo::builder().size_in_mib(81920).build(),
                                    )
                                    .build(),
                            )
                            .build(),
                    )
                    .network_info(
                        NetworkInfo::builder()
                            .default_network_card_index(0)
                            .ipv4_addresses_per_interface(50)
                            .network_cards(
                                NetworkCardInfo::builder()
                                    .network_card_index(0)
                                    .maximum_network_interfaces(2)
                                    .build(),
                            )
                            .build(),
                    )
                    .build(),
            )
            .build()
    })
}

fn subnets() -> Rule {
    mock!(aws_sdk_ec2::Client::describe_subnets).then_output(|| {
        DescribeSubnetsOutput::builder()
            .subnets(
                Subnet::builder()
                    .subnet_id("subnet-a")
                    .availability_zone("us-east-1a")
                    .build(),
            )
            .subnets(
                Subnet::builder()
                    .subnet_id("subnet-b")
                    .availability_zone("us-east-1b")
                    .build(),
            )
            .build()
    })
}

fn reservation(available: i32, capacity_block: bool) -> Rule {
    mock!(aws_sdk_ec2::Client::describe_capacity_reservations).then_output(move || {
        DescribeCapacityReservationsOutput::builder()
            .capacity_reservations(
                CapacityReservation::builder()
                    .capacity_reservation_id(RESERVATION)
                    .instance_type("p5.48xlarge")
                    .availability_zone("us-east-1b")
                    .total_instance_count(8)
                    .available_instance_count(available)
                    .state(aws_sdk_ec2::types::CapacityReservationState::Active)
                    .reservation_type(if capacity_block {
                        CapacityReservationType::CapacityBlock
                    } else {
                        CapacityReservationType::Default
                    })
                    .end_date(aws_smithy_types::DateTime::from_secs(4_102_444_800))
                    .build(),
            )
            .build()
    })
}

fn running() -> Rule {
    mock!(aws_sdk_ec2::Client::describe_instances).then_compute_output(|input| {
        let instances = input
            .instance_ids()
            .iter()
            .map(|id| {
                Instance::builder()
                    .instance_id(id)
                    .state(
                        InstanceState::builder()
                            .name(InstanceStateName::Running)
                            .build(),
                    )
                    .build()
            })
            .collect();
        DescribeInstancesOutput::builder()
            .reservations(
                Reservation::builder()
                    .set_instances(Some(instances))
                    .build(),
            )
            .build()
    })
}

fn terminate() -> Rule {
    mock!(aws_sdk_ec2::Client::terminate_instances)
        .then_output(|| TerminateInstancesOutput::builder().build())
}

fn attach() -> Rule {
    mock!(aws_sdk_autoscaling::Client::attach_instances).then_output(|| {
        aws_sdk_autoscaling::operation::attach_instances::AttachInstancesOutput::builder().build()
    })
}

fn launched(ids: &[&str], zone: &str) -> CreateFleetOutput {
    CreateFleetOutput::builder()
        .fleet_id("fleet-1")
        .instances(
            CreateFleetInstance::builder()
                .set_instance_ids(Some(ids.iter().map(|s| (*s).to_owned()).collect()))
                .launch_template_and_overrides(overrides(zone))
                .build(),
        )
        .build()
}

fn overrides(zone: &str) -> LaunchTemplateAndOverridesResponse {
    LaunchTemplateAndOverridesResponse::builder()
        .overrides(
            FleetLaunchTemplateOverrides::builder()
                .instance_type(InstanceType::P548xlarge)
                .availability_zone(zone)
                .build(),
        )
        .build()
}

fn ice(zone: &str) -> CreateFleetError {
    CreateFleetError::builder()
        .error_code("InsufficientInstanceCapacity")
        .error_message("We currently do not have sufficient p5.48xlarge capacity")
        .launch_template_and_overrides(overrides(zone))
        .build()
}

fn request(count: i32, min: i32, id: &str) -> AtomicIncrease {
    AtomicIncrease {
        id: GROUP.into(),
        count,
        min_count: min,
        request_id: id.into(),
    }
}

fn provider(ec2_extra: &[&Rule], reserved: Option<(i32, bool)>) -> AwsProvider {
    let groups = describe_groups();
    let lt = launch_template(reserved.is_some(), reserved.is_some_and(|r| r.1));
    let types = instance_types();
    let subnets = subnets();
    let running = running();
    let attach = attach();
    let reservation = reservation(reserved.map_or(0, |r| r.0), reserved.is_some_and(|r| r.1));
    let mut ec2: Vec<&Rule> = ec2_extra.to_vec();
    ec2.extend([&lt, &types, &subnets, &running, &reservation]);
    let config = if reserved.is_some() {
        format!(
            "nodeGroups: [{{asg: {GROUP}, capacityType: reserved, capacityReservationId: {RESERVATION}, pricePerHour: 1}}]"
        )
    } else {
        format!("nodeGroups: [{{asg: {GROUP}, pricePerHour: 98.32}}]")
    };
    AwsProvider::new(
        clients(&ec2, &[&groups, &attach]),
        Config::parse(&config, "test").unwrap(),
    )
    .with_attach_poll(Duration::from_millis(10))
}

#[tokio::test]
async fn a_gang_asks_the_fleet_for_min_target_capacity_in_one_zone_and_type() {
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet)
        .match_requests(|r: &CreateFleetInput| {
            let od = r.on_demand_options().expect("on-demand options");
            let target = r.target_capacity_specification().expect("target");
            r.r#type() == Some(&FleetType::Instant)
                && od.min_target_capacity() == Some(3)
                && od.single_instance_type() == Some(true)
                && od.single_availability_zone() == Some(true)
                && target.total_target_capacity() == Some(4)
                && target.default_target_capacity_type()
                    == Some(&DefaultTargetCapacityType::OnDemand)
                && r.client_token() == Some("gpu/req-1")
                && r.launch_template_configs()[0].overrides().len() == 2
        })
        .then_output(|| launched(&["i-1", "i-2", "i-3", "i-4"], "us-east-1a"));
    let provider = provider(&[&fleet], None);
    let ids = provider
        .atomic_increase_size(&request(4, 3, "req-1"))
        .await
        .unwrap();
    assert_eq!(
        ids,
        [
            "aws:///us-east-1a/i-1",
            "aws:///us-east-1a/i-2",
            "aws:///us-east-1a/i-3",
            "aws:///us-east-1a/i-4"
        ]
    );
    assert_eq!(fleet.num_calls(), 1);
}

#[tokio::test]
async fn a_200_with_no_instances_is_a_shortfall_and_the_zone_is_skipped_next_time() {
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet).then_output(|| {
        CreateFleetOutput::builder()
            .fleet_id("fleet-1")
            .errors(ice("us-east-1a"))
            .errors(ice("us-east-1b"))
            .build()
    });
    let terminate = terminate();
    let provider = provider(&[&fleet, &terminate], None);
    let err = provider
        .atomic_increase_size(&request(4, 4, "req-1"))
        .await
        .unwrap_err();
    match &err {
        ProviderError::OutOfCapacity {
            code, rolled_back, ..
        } => {
            assert_eq!(code, "InsufficientInstanceCapacity");
            assert_eq!(*rolled_back, 0);
        }
        other => panic!("expected out of capacity, got {other:?}"),
    }
    assert_eq!(terminate.num_calls(), 0, "nothing started, nothing to undo");
    // Both zones answered ICE: the next try fails from the cache without calling EC2.
    let again = provider
        .atomic_increase_size(&request(4, 4, "req-2"))
        .await
        .unwrap_err();
    assert!(
        matches!(again, ProviderError::OutOfCapacity { .. }),
        "{again:?}"
    );
    assert_eq!(fleet.num_calls(), 1);
}

#[tokio::test]
async fn a_short_launch_is_terminated_and_reported_with_what_was_rolled_back() {
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet).then_output(|| {
        let mut out = launched(&["i-1", "i-2"], "us-east-1a");
        out.errors = Some(vec![ice("us-east-1a")]);
        out
    });
    let terminate = mock!(aws_sdk_ec2::Client::terminate_instances)
        .match_requests(|r| r.instance_ids() == ["i-1", "i-2"])
        .then_output(|| TerminateInstancesOutput::builder().build());
    let provider = provider(&[&fleet, &terminate], None);
    let err = provider
        .atomic_increase_size(&request(4, 4, "req-1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::OutOfCapacity { rolled_back: 2, .. }),
        "{err:?}"
    );
    assert_eq!(terminate.num_calls(), 1);
    assert_eq!(provider.target_size(GROUP).await.unwrap(), 0);
}

#[tokio::test]
async fn a_capacity_block_with_too_few_free_slots_is_refused_before_launching() {
    let fleet =
        mock!(aws_sdk_ec2::Client::create_fleet).then_output(|| launched(&["i-1"], "us-east-1b"));
    let provider = provider(&[&fleet], Some((2, true)));
    let err = provider
        .atomic_increase_size(&request(4, 4, "req-1"))
        .await
        .unwrap_err();
    match err {
        ProviderError::OutOfCapacity { code, .. } => {
            assert_eq!(code, "ReservationCapacityExceeded")
        }
        other => panic!("expected out of capacity, got {other:?}"),
    }
    assert_eq!(fleet.num_calls(), 0);
}

#[tokio::test]
async fn a_capacity_block_partial_fill_is_rolled_back() {
    // The block says 4 are free, the launch gets 2 (the block fills partly, never falls back).
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet)
        .match_requests(|r: &CreateFleetInput| {
            r.on_demand_options().is_none()
                && r.target_capacity_specification()
                    .and_then(|t| t.default_target_capacity_type())
                    == Some(&DefaultTargetCapacityType::CapacityBlock)
                && r.launch_template_configs()[0]
                    .overrides()
                    .iter()
                    .all(|o| o.availability_zone() == Some("us-east-1b"))
        })
        .then_output(|| {
            let mut out = launched(&["i-1", "i-2"], "us-east-1b");
            out.errors = Some(vec![ice("us-east-1b")]);
            out
        });
    let terminate = mock!(aws_sdk_ec2::Client::terminate_instances)
        .match_requests(|r| r.instance_ids() == ["i-1", "i-2"])
        .then_output(|| TerminateInstancesOutput::builder().build());
    let provider = provider(&[&fleet, &terminate], Some((4, true)));
    let err = provider
        .atomic_increase_size(&request(4, 4, "req-1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProviderError::OutOfCapacity { rolled_back: 2, .. }),
        "{err:?}"
    );
    assert_eq!((fleet.num_calls(), terminate.num_calls()), (1, 1));
}

#[tokio::test]
async fn a_throttled_create_fleet_is_retried_with_the_same_client_token() {
    let throttled = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>r-1</RequestID></Response>"#;
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet)
        .match_requests(|r: &CreateFleetInput| r.client_token() == Some("gpu/req-1"))
        .sequence()
        .http_status(503, Some(throttled.to_owned()))
        .output(|| launched(&["i-1", "i-2"], "us-east-1a"))
        .build();
    let provider = provider(&[&fleet], None);
    let ids = provider
        .atomic_increase_size(&request(2, 2, "req-1"))
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    assert_eq!(
        fleet.num_calls(),
        2,
        "the SDK retried the same request (same ClientToken)"
    );
    // The controller retrying the same request id (e.g. after a lost answer) gets the same
    // gang back without a new CreateFleet.
    let again = provider
        .atomic_increase_size(&request(2, 2, "req-1"))
        .await
        .unwrap();
    assert_eq!(again, ids);
    assert_eq!(fleet.num_calls(), 2);
}

#[tokio::test]
async fn reservations_are_reported_with_use_and_end() {
    let provider = provider(&[], Some((3, false)));
    let details = provider.node_group_details(&[]).await.unwrap();
    assert_eq!(details.len(), 1);
    let group = &details[0];
    assert_eq!(group.capacity_type, CapacityType::Reserved);
    let r = group.reservation.as_ref().expect("reservation");
    assert_eq!(
        (r.id.as_str(), r.total, r.in_use, r.left()),
        (RESERVATION, 8, 5, 3)
    );
    assert_eq!(
        r.end_time,
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(4_102_444_800))
    );
    // The template's zone is the reservation's.
    let labels = group.template.node.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["topology.kubernetes.io/zone"], "us-east-1b");
}

#[tokio::test]
async fn an_odcr_gang_goes_to_the_reservation_zone_with_min_target_capacity() {
    let fleet = mock!(aws_sdk_ec2::Client::create_fleet)
        .match_requests(|r: &CreateFleetInput| {
            r.on_demand_options().and_then(|o| o.min_target_capacity()) == Some(2)
                && r.launch_template_configs()[0].overrides().len() == 1
                && r.launch_template_configs()[0].overrides()[0].subnet_id() == Some("subnet-b")
        })
        .then_output(|| launched(&["i-1", "i-2", "i-3"], "us-east-1b"));
    let provider = provider(&[&fleet], Some((3, false)));
    // 5 wanted, 3 free: the request is cut to what the reservation holds.
    let ids = provider
        .atomic_increase_size(&request(5, 2, "req-1"))
        .await
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert_eq!(fleet.num_calls(), 1);
}
