//! `DescribeInstanceTypes` → [`MachineShape`], cached: the call is slow, paginated and rate
//! limited, and instance types do not change.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{ArchitectureType, InstanceType, InstanceTypeInfo};
use dra_provider::ProviderError;
use dra_provider_machines::{Architecture, Gpu, MachineShape, NeuronDevices, eks};
use tokio::sync::Mutex;

use crate::aws::{Aws, sdk_error};

/// The shape of one instance type as EC2 describes it (no zone, region or volume yet).
#[must_use]
pub fn shape_of(info: &InstanceTypeInfo) -> MachineShape {
    let network = info.network_info();
    // nodeadm: the ENIs of the default network card, not of the whole machine.
    let default_card = network
        .and_then(|n| n.default_network_card_index())
        .unwrap_or(0);
    let enis = network
        .and_then(|n| {
            n.network_cards()
                .iter()
                .find(|c| c.network_card_index().unwrap_or(0) == default_card)
                .and_then(|c| c.maximum_network_interfaces())
                .or_else(|| n.maximum_network_interfaces())
        })
        .unwrap_or(0);
    let ips = network
        .and_then(|n| n.ipv4_addresses_per_interface())
        .unwrap_or(0);
    let max_pods = if enis > 0 && ips > 0 {
        eks::max_pods(
            u32::try_from(enis).unwrap_or(0),
            u32::try_from(ips).unwrap_or(0),
        )
    } else {
        eks::DEFAULT_MAX_PODS
    };
    let arm = info
        .processor_info()
        .map(|p| p.supported_architectures())
        .is_some_and(|a| {
            a.contains(&ArchitectureType::Arm64) && !a.contains(&ArchitectureType::X8664)
        });
    let to_u32 = |v: Option<i32>| v.and_then(|v| u32::try_from(v).ok()).unwrap_or(0);
    let to_u64 = |v: Option<i32>| v.and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
    MachineShape {
        instance_type: info
            .instance_type()
            .map(|t| t.as_str().to_owned())
            .unwrap_or_default(),
        vcpus: to_u32(info.v_cpu_info().and_then(|v| v.default_v_cpus())),
        memory_mib: info
            .memory_info()
            .and_then(|m| m.size_in_mib())
            .and_then(|m| u64::try_from(m).ok())
            .unwrap_or(0),
        architecture: if arm {
            Architecture::Arm64
        } else {
            Architecture::Amd64
        },
        max_pods,
        gpus: info
            .gpu_info()
            .map(|g| {
                g.gpus()
                    .iter()
                    .map(|d| Gpu {
                        manufacturer: d.manufacturer().unwrap_or_default().to_owned(),
                        name: d.name().unwrap_or_default().to_owned(),
                        count: to_u32(d.count()),
                        memory_mib: to_u64(d.memory_info().and_then(|m| m.size_in_mib())),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        neuron: info.neuron_info().and_then(|n| {
            let d = n.neuron_devices().first()?;
            Some(NeuronDevices {
                name: d.name().unwrap_or_default().to_owned(),
                count: to_u32(d.count()),
                cores_per_device: to_u32(d.core_info().and_then(|c| c.count())),
                memory_mib: to_u64(d.memory_info().and_then(|m| m.size_in_mib())),
            })
        }),
        efa_interfaces: if network.and_then(|n| n.efa_supported()).unwrap_or(false) {
            to_u32(
                network
                    .and_then(|n| n.efa_info())
                    .and_then(|e| e.maximum_efa_interfaces()),
            )
        } else {
            0
        },
        zone: None,
        region: None,
        root_volume_gib: None,
    }
}

/// Cache of instance type shapes.
#[derive(Debug)]
pub struct InstanceTypes {
    ttl: Duration,
    cache: Mutex<BTreeMap<String, (Instant, MachineShape)>>,
}

impl InstanceTypes {
    /// A cache keeping answers for `ttl`.
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            cache: Mutex::new(BTreeMap::new()),
        }
    }

    /// Shapes of `types`, from the cache or one `DescribeInstanceTypes` call for the missing.
    ///
    /// # Errors
    /// The API's error; an unknown type is [`ProviderError::NotFound`].
    pub async fn shapes(
        &self,
        aws: &Aws,
        types: &[String],
    ) -> Result<BTreeMap<String, MachineShape>, ProviderError> {
        let mut cache = self.cache.lock().await;
        let now = Instant::now();
        let missing: Vec<String> = types
            .iter()
            .filter(|t| {
                cache
                    .get(*t)
                    .is_none_or(|(at, _)| now.duration_since(*at) > self.ttl)
            })
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        // DescribeInstanceTypes takes up to 100 names per call.
        for chunk in missing.chunks(100) {
            let mut pages = aws
                .ec2
                .describe_instance_types()
                .set_instance_types(Some(
                    chunk
                        .iter()
                        .map(|t| InstanceType::from(t.as_str()))
                        .collect(),
                ))
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| sdk_error("DescribeInstanceTypes", &e))?;
                for info in page.instance_types() {
                    let shape = shape_of(info);
                    tracing::debug!(
                        instance_type = shape.instance_type,
                        "described instance type"
                    );
                    cache.insert(shape.instance_type.clone(), (now, shape));
                }
            }
        }
        types
            .iter()
            .map(|t| {
                cache
                    .get(t)
                    .map(|(_, s)| (t.clone(), s.clone()))
                    .ok_or_else(|| ProviderError::NotFound {
                        what: format!("instance type {t:?} (DescribeInstanceTypes)"),
                    })
            })
            .collect()
    }
}
