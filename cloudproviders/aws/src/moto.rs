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
        clients(&self.endpoint).await
    }
}

async fn clients(endpoint: &str) -> Aws {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http_client())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("testing", "testing", None, None, "moto"))
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .load()
        .await;
    Aws::from_sdk_config(&config)
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
pub async fn subnet(aws: &Aws) -> String {
    subnets(aws, &["us-east-1a"]).await.remove(0)
}

/// Creates a VPC with one subnet in each of `zones`; returns the subnet ids in that order.
///
/// # Panics
/// When moto refuses (fixtures are test code).
#[allow(clippy::expect_used)]
pub async fn subnets(aws: &Aws, zones: &[&str]) -> Vec<String> {
    let vpc = aws
        .ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("CreateVpc");
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).expect("vpc id");
    let mut ids = Vec::new();
    for (i, zone) in zones.iter().enumerate() {
        let id = aws
            .ec2
            .create_subnet()
            .vpc_id(vpc_id)
            .cidr_block(format!("10.0.{}.0/20", i * 16))
            .availability_zone(*zone)
            .send()
            .await
            .expect("CreateSubnet")
            .subnet()
            .and_then(|s| s.subnet_id())
            .expect("subnet id")
            .to_owned();
        ids.push(id);
    }
    ids
}

/// A proxy in front of moto that answers EC2 `CreateFleet` requests naming one of its
/// `ice_subnets` as EC2 does when the zone has no capacity (HTTP 200, no instance, an
/// `InsufficientInstanceCapacity` error per launch spec) and forwards everything else to
/// moto unchanged. moto launches whatever it is asked; this is how a test gets an
/// insufficient-capacity answer from the one group it chooses.
#[derive(Debug)]
pub struct IceProxy {
    /// `http://127.0.0.1:<port>`: point the provider's clients here.
    pub endpoint: String,
    ice_subnets: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl IceProxy {
    /// Starts a proxy to `moto` on a free loopback port.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(moto: &MotoServer) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let upstream = moto.endpoint.trim_start_matches("http://").to_owned();
        let ice_subnets = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let subnets = std::sync::Arc::clone(&ice_subnets);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let subnets = std::sync::Arc::clone(&subnets);
                tokio::spawn(async move {
                    let _ = proxy_one(client, &upstream, &subnets).await;
                });
            }
        });
        Ok(Self {
            endpoint,
            ice_subnets,
            task,
        })
    }

    /// From now on, CreateFleet in `subnet` answers insufficient capacity.
    pub fn out_of_capacity_in(&self, subnet: &str) {
        self.ice_subnets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(subnet.to_owned());
    }

    /// SDK clients through the proxy, as [`MotoServer::aws`] makes them for moto.
    pub async fn aws(&self) -> Aws {
        clients(&self.endpoint).await
    }
}

impl Drop for IceProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one HTTP/1.1 request (headers and a `Content-Length` body) from `stream`.
async fn read_request(
    stream: &mut tokio::net::TcpStream,
) -> std::io::Result<Option<(Vec<u8>, Vec<u8>)>> {
    use tokio::io::AsyncReadExt;
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = buffer.split_off(head_end);
    Ok(Some((buffer, body)))
}

/// Serves the requests of one client connection, one at a time.
async fn proxy_one(
    mut client: tokio::net::TcpStream,
    upstream: &str,
    ice_subnets: &std::sync::Mutex<Vec<String>>,
) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    while let Some((head, body)) = read_request(&mut client).await? {
        let text = String::from_utf8_lossy(&body).to_string();
        let ice = text.contains("Action=CreateFleet")
            && ice_subnets
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .any(|s| text.contains(s.as_str()));
        if ice {
            let answer = ice_answer(&text);
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/xml\r\ncontent-length: {}\r\n\r\n{answer}",
                answer.len()
            );
            client.write_all(response.as_bytes()).await?;
            continue;
        }
        // Forward with `Connection: close`, so the answer ends where moto's connection does.
        let head = String::from_utf8_lossy(&head)
            .lines()
            .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\r\n");
        let mut server = tokio::net::TcpStream::connect(upstream).await?;
        server
            .write_all(format!("{head}\r\nconnection: close\r\n\r\n").as_bytes())
            .await?;
        server.write_all(&body).await?;
        let mut answer = Vec::new();
        server.read_to_end(&mut answer).await?;
        client.write_all(&answer).await?;
        // moto's answer says `Connection: close`; the SDK opens a new connection.
        return Ok(());
    }
    Ok(())
}

/// The CreateFleet answer of EC2 when no launch spec has capacity: no instance, one error
/// per override (instance type and zone read from the request, as far as it names them).
fn ice_answer(request: &str) -> String {
    let field = |suffix: &str| {
        request
            .split('&')
            .find_map(|kv| {
                let (key, value) = kv.split_once('=')?;
                key.ends_with(suffix).then(|| value.to_owned())
            })
            .unwrap_or_default()
    };
    let instance_type = field(".InstanceType");
    let zone = field(".AvailabilityZone");
    let subnet = field(".SubnetId");
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>7c1e0000-0000-4000-8000-000000000ice</requestId>
  <fleetId>fleet-00000000-0000-4000-8000-000000000ice</fleetId>
  <errorSet>
    <item>
      <launchTemplateAndOverrides>
        <overrides>
          <instanceType>{instance_type}</instanceType>
          <availabilityZone>{zone}</availabilityZone>
          <subnetId>{subnet}</subnetId>
        </overrides>
      </launchTemplateAndOverrides>
      <lifecycle>on-demand</lifecycle>
      <errorCode>InsufficientInstanceCapacity</errorCode>
      <errorMessage>We currently do not have sufficient {instance_type} capacity in the Availability Zone you requested ({zone}).</errorMessage>
    </item>
  </errorSet>
  <fleetInstanceSet/>
</CreateFleetResponse>"#
    )
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
