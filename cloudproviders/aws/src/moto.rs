//! Test support: a moto server (the AWS API emulator, PyPI `moto[server]`) on a free loopback
//! port, SDK clients pointed at it, and fixtures (VPC, subnet, launch template, ASG).
//!
//! Used by this crate's tests and the controller's end-to-end test. A missing moto is an error
//! that says how to install it: tests that need it fail, they never skip.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use aws_config::BehaviorVersion;
use aws_credential_types::Credentials;
use aws_sdk_autoscaling::types::Tag as AsgTag;
use aws_sdk_ec2::types::{
    InstanceType, LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateEbsBlockDeviceRequest,
    RequestLaunchTemplateData,
};

use crate::aws::{Aws, http_client};

/// Region the fixtures use.
pub const REGION: &str = "us-east-1";

/// A running moto server; killed on drop.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
}

/// moto could not be started.
#[derive(Debug, thiserror::Error)]
pub enum MotoError {
    /// Not installed.
    #[error(
        "moto is not installed for python3 (`python3 -c 'import moto.server'` failed); install it with: pip install 'moto[server]'"
    )]
    NotInstalled,
    /// Started but never answered.
    #[error("moto server on {endpoint} did not answer within 30 s")]
    NoAnswer {
        /// Where it was started.
        endpoint: String,
    },
    /// I/O starting it.
    #[error("unable to start moto")]
    Io(#[from] std::io::Error),
}

impl MotoServer {
    /// Starts `python3 -m moto.server` on a free 127.0.0.1 port and waits until it answers.
    ///
    /// # Errors
    /// [`MotoError`].
    pub fn start() -> Result<Self, MotoError> {
        let python = std::env::var("DRA_MOTO_PYTHON").unwrap_or_else(|_| "python3".to_owned());
        let installed = Command::new(&python)
            .args(["-c", "import moto.server"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !installed {
            return Err(MotoError::NotInstalled);
        }
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(&python)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let server = Self {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(30) {
                return Err(MotoError::NoAnswer {
                    endpoint: server.endpoint.clone(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// SDK clients for this server: static credentials (moto routes requests by the SigV4
    /// scope, so they must be signed), fixed region, no retries (moto answers unimplemented
    /// actions with a 500 that must fail fast).
    pub async fn aws(&self) -> Aws {
        let config = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http_client())
            .region(aws_config::Region::new(REGION))
            .endpoint_url(&self.endpoint)
            .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .load()
            .await;
        Aws::from_sdk_config(&config)
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the fixtures created for one group.
#[derive(Debug, Clone)]
pub struct GroupFixture {
    /// ASG name.
    pub asg: String,
    /// Subnet.
    pub subnet: String,
    /// Zone of the subnet.
    pub zone: String,
    /// Launch template id.
    pub launch_template: String,
}

/// Creates a VPC with one subnet in `us-east-1a`; returns the subnet id.
///
/// # Panics
/// When moto refuses (fixtures are test code).
#[allow(clippy::expect_used)]
pub async fn subnet(aws: &Aws) -> String {
    let vpc = aws
        .ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("CreateVpc");
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id");
    aws.ec2
        .create_subnet()
        .vpc_id(vpc_id)
        .cidr_block("10.0.0.0/20")
        .availability_zone("us-east-1a")
        .send()
        .await
        .expect("CreateSubnet")
        .subnet()
        .and_then(|s| s.subnet_id())
        .expect("subnet id")
        .to_owned()
}

/// Creates a launch template for `instance_type` (100 GiB root volume) and an ASG `name` of
/// 0..`max` in `subnet`, with the given tags.
///
/// # Panics
/// When moto refuses (fixtures are test code).
#[allow(clippy::expect_used)]
pub async fn group(
    aws: &Aws,
    subnet: &str,
    name: &str,
    instance_type: &str,
    max: i32,
    tags: &[(&str, &str)],
) -> GroupFixture {
    let lt = aws
        .ec2
        .create_launch_template()
        .launch_template_name(format!("{name}-lt"))
        .launch_template_data(
            RequestLaunchTemplateData::builder()
                .image_id("ami-12c6146b")
                .instance_type(InstanceType::from(instance_type))
                .block_device_mappings(
                    LaunchTemplateBlockDeviceMappingRequest::builder()
                        .device_name("/dev/xvda")
                        .ebs(
                            LaunchTemplateEbsBlockDeviceRequest::builder()
                                .volume_size(100)
                                .build(),
                        )
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect("CreateLaunchTemplate");
    let lt_id = lt
        .launch_template()
        .and_then(|l| l.launch_template_id())
        .expect("launch template id")
        .to_owned();
    let mut create = aws
        .autoscaling
        .create_auto_scaling_group()
        .auto_scaling_group_name(name)
        .min_size(0)
        .max_size(max)
        .desired_capacity(0)
        .vpc_zone_identifier(subnet)
        .launch_template(
            aws_sdk_autoscaling::types::LaunchTemplateSpecification::builder()
                .launch_template_id(&lt_id)
                .version("$Default")
                .build(),
        );
    for (key, value) in tags {
        create = create.tags(
            AsgTag::builder()
                .key(*key)
                .value(*value)
                .propagate_at_launch(true)
                .build(),
        );
    }
    create.send().await.expect("CreateAutoScalingGroup");
    GroupFixture {
        asg: name.to_owned(),
        subnet: subnet.to_owned(),
        zone: "us-east-1a".to_owned(),
        launch_template: lt_id,
    }
}
