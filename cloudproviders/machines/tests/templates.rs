//! Templates of real machine types, with expectations from the EKS AMI's formulas and the
//! NVIDIA DRA driver's slice layout (not from our own output).

use dra_provider_machines::{
    Architecture, Gpu, MachineShape, NeuronDevices, Platform, TemplateError, TemplateOptions, eks,
    gce, gke, node_template, node_template_for,
};

/// p5.48xlarge as DescribeInstanceTypes reports it: 192 vCPUs, 2,097,152 MiB, 8 × H100 80 GB,
/// 32 EFA interfaces; default network card 2 ENIs × 50 IPv4 addresses.
fn p5() -> MachineShape {
    MachineShape {
        instance_type: "p5.48xlarge".into(),
        vcpus: 192,
        memory_mib: 2_097_152,
        architecture: Architecture::Amd64,
        max_pods: eks::max_pods(2, 50),
        gpus: vec![Gpu {
            manufacturer: "NVIDIA".into(),
            name: "H100".into(),
            count: 8,
            memory_mib: 81920,
        }],
        neuron: None,
        efa_interfaces: 32,
        zone: Some("us-east-1a".into()),
        region: Some("us-east-1".into()),
        root_volume_gib: Some(100),
    }
}

fn q(t: &dra_api::NodeTemplate, map: &str, key: &str) -> String {
    let m = if map == "capacity" {
        &t.capacity
    } else {
        t.allocatable.as_ref().expect("allocatable")
    };
    m[key].0.clone()
}

#[test]
fn p5_capacity_and_allocatable_follow_the_eks_ami() {
    let t = node_template(&p5(), &TemplateOptions::default()).expect("template");
    assert_eq!(t.labels["node.kubernetes.io/instance-type"], "p5.48xlarge");
    assert_eq!(t.labels["topology.kubernetes.io/zone"], "us-east-1a");
    assert_eq!(t.labels["topology.kubernetes.io/region"], "us-east-1");
    assert_eq!(t.labels["kubernetes.io/arch"], "amd64");
    assert_eq!(q(&t, "capacity", "cpu"), "192");
    assert_eq!(q(&t, "capacity", "pods"), "100");
    // 2,097,152 MiB less 7.5 % (157,287 MiB rounded up) = 1,939,865 MiB.
    assert_eq!(
        q(&t, "capacity", "memory"),
        format!("{}Ki", 1_939_865u64 * 1024)
    );
    // kubeReserved cpu: 60 + 10 + 10 + 188,000 × 0.25 % = 550m.
    assert_eq!(q(&t, "allocatable", "cpu"), "191450m");
    // kubeReserved memory 11 × 100 + 255 = 1,355 Mi, evictionHard 100 Mi.
    assert_eq!(
        q(&t, "allocatable", "memory"),
        format!("{}Ki", (1_939_865u64 - 1_355 - 100) * 1024)
    );
    // 100 GiB root volume, 1 GiB kubeReserved, 10 % nodefs eviction.
    assert_eq!(q(&t, "capacity", "ephemeral-storage"), "104857600Ki");
    // 100 - 1 - 10 = 89 GiB.
    assert_eq!(
        q(&t, "allocatable", "ephemeral-storage"),
        format!("{}Ki", 89u64 << 20)
    );
    assert_eq!(q(&t, "capacity", "vpc.amazonaws.com/efa"), "32");
    assert!(
        !t.capacity.contains_key("nvidia.com/gpu"),
        "the DRA driver, not the device plugin, serves the GPUs by default"
    );
    assert_eq!(t.resource_slices.len(), 1);
    let devices = t.resource_slices[0].devices.as_ref().expect("devices");
    assert_eq!(devices.len(), 8);
}

#[test]
fn device_plugin_mode_reports_nvidia_gpu_as_an_extended_resource() {
    let options: TemplateOptions =
        serde_saphyr::from_str("gpu: {devicePlugin: true, dra: false}").expect("yaml");
    let t = node_template(&p5(), &options).expect("template");
    assert_eq!(q(&t, "capacity", "nvidia.com/gpu"), "8");
    assert_eq!(q(&t, "allocatable", "nvidia.com/gpu"), "8");
    assert!(t.resource_slices.is_empty());
}

#[test]
fn every_field_can_be_overridden_per_group() {
    let options: TemplateOptions = serde_saphyr::from_str(
        r#"
labels: {team: ml, node.kubernetes.io/instance-type: renamed}
taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
maxPods: 110
kubeReserved: {cpu: 1, memory: 2Gi}
systemReserved: {memory: 1Gi}
evictionHardMemory: 500Mi
vmMemoryOverheadPercent: 0
capacity: {example.com/thing: "3"}
gpu:
  mig: true
  driverVersion: "580.65.06"
  cudaDriverVersion: "13.0"
  sliceLayout: combined
"#,
    )
    .expect("yaml");
    let t = node_template(&p5(), &options).expect("template");
    assert_eq!(t.labels["team"], "ml");
    assert_eq!(t.labels["node.kubernetes.io/instance-type"], "renamed");
    assert_eq!(t.taints[0].key, "nvidia.com/gpu");
    assert_eq!(q(&t, "capacity", "pods"), "110");
    assert_eq!(
        q(&t, "capacity", "memory"),
        format!("{}Ki", 2_097_152u64 * 1024)
    );
    assert_eq!(q(&t, "allocatable", "cpu"), "191000m");
    assert_eq!(
        q(&t, "allocatable", "memory"),
        format!("{}Ki", (2_097_152u64 - 2048 - 1024 - 500) * 1024)
    );
    assert_eq!(q(&t, "capacity", "example.com/thing"), "3");
    // MIG, Kubernetes 1.34 layout: one slice per GPU with its counter set.
    assert_eq!(t.resource_slices.len(), 8);
    let first = &t.resource_slices[0];
    assert_eq!(first.shared_counters.as_ref().expect("counters").len(), 1);
    let gpu0 = &first.devices.as_ref().expect("devices")[0];
    assert_eq!(gpu0.name, "gpu-0");
    assert_eq!(
        gpu0.attributes.as_ref().expect("attrs")["driverVersion"]
            .version
            .as_deref(),
        Some("580.65.6")
    );
}

#[test]
fn trainium_reports_neuron_devices_and_cores() {
    let shape = MachineShape {
        instance_type: "trn1.32xlarge".into(),
        vcpus: 128,
        memory_mib: 524_288,
        architecture: Architecture::Amd64,
        max_pods: eks::max_pods(5, 50),
        gpus: vec![],
        neuron: Some(NeuronDevices {
            name: "Trainium".into(),
            count: 16,
            cores_per_device: 2,
            memory_mib: 32768,
        }),
        efa_interfaces: 8,
        zone: None,
        region: None,
        root_volume_gib: None,
    };
    let t = node_template(&shape, &TemplateOptions::default()).expect("template");
    assert_eq!(q(&t, "capacity", "aws.amazon.com/neuron"), "16");
    assert_eq!(q(&t, "capacity", "aws.amazon.com/neuroncore"), "32");
    assert_eq!(q(&t, "capacity", "pods"), "247");
    assert!(t.resource_slices.is_empty());
    assert!(!t.capacity.contains_key("ephemeral-storage"));
}

#[test]
fn an_unknown_nvidia_model_is_an_error_naming_the_fix_unless_overridden() {
    let mut shape = p5();
    shape.gpus[0].name = "X9000".into();
    let err = node_template(&shape, &TemplateOptions::default()).expect_err("unknown model");
    assert!(matches!(err, TemplateError::UnknownGpu { .. }));
    assert!(err.to_string().contains("gpu.productName"), "{err}");
    let options: TemplateOptions = serde_saphyr::from_str(
        "gpu: {productName: NVIDIA X9000, architecture: Rubin, cudaComputeCapability: '11.0'}",
    )
    .expect("yaml");
    let t = node_template(&shape, &options).expect("overridden");
    let device = &t.resource_slices[0].devices.as_ref().expect("devices")[0];
    assert_eq!(
        device.attributes.as_ref().expect("attrs")["productName"]
            .string
            .as_deref(),
        Some("NVIDIA X9000")
    );
}

#[test]
fn a_bad_quantity_names_the_option() {
    let options: TemplateOptions =
        serde_saphyr::from_str("kubeReserved: {memory: lots}").expect("yaml");
    let err = node_template(&p5(), &options).expect_err("bad quantity");
    assert_eq!(
        err,
        TemplateError::Quantity {
            field: "kubeReserved.memory".into(),
            value: "lots".into()
        }
    );
}

#[test]
fn the_template_becomes_the_node_new_node_builds() {
    let t = node_template(&p5(), &TemplateOptions::default()).expect("template");
    let spec = dra_api::NodeGroupSpec {
        provider: "aws".into(),
        provider_id: "gpu-asg".into(),
        min_size: 0,
        max_size: 4,
        capacity_type: dra_api::CapacityType::OnDemand,
        reservation: None,
        price_per_hour: 98.32,
        priority: 0,
        topology_domain: None,
        template: t,
        scale_down: None,
    };
    let node = dra_api::new_node("gpu", &spec, "ip-10-0-0-1");
    let labels = node.node.metadata.labels.expect("labels");
    assert_eq!(labels["beta.kubernetes.io/instance-type"], "p5.48xlarge");
    assert_eq!(
        labels["failure-domain.beta.kubernetes.io/zone"],
        "us-east-1a"
    );
    assert_eq!(node.slices.len(), 1);
    assert_eq!(node.slices[0].spec.pool.name, "ip-10-0-0-1");
    assert_eq!(
        node.slices[0].spec.node_name.as_deref(),
        Some("ip-10-0-0-1")
    );
}

/// a3-highgpu-8g as `machineTypes.get` reports it (208 vCPUs, memoryMb 1,916,928 = 1,872 GB,
/// accelerators 8 × nvidia-h100-80gb) with a 200 GiB boot disk, on GKE.
fn a3() -> MachineShape {
    MachineShape {
        instance_type: "a3-highgpu-8g".into(),
        vcpus: 208,
        memory_mib: 1_916_928,
        architecture: Architecture::Amd64,
        max_pods: gke::DEFAULT_MAX_PODS,
        gpus: vec![gce::accelerator_gpus("nvidia-h100-80gb", 8)],
        neuron: None,
        efa_interfaces: 0,
        zone: Some("us-central1-a".into()),
        region: Some("us-central1".into()),
        root_volume_gib: Some(200),
    }
}

#[test]
fn a3_on_gke_follows_the_gke_tiers_and_cos_shares() {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let t = node_template_for(Platform::Gke, &a3(), &TemplateOptions::default()).expect("a3");
    assert_eq!(t.labels["topology.gke.io/zone"], "us-central1-a");
    assert_eq!(q(&t, "capacity", "pods"), "110");
    // Kernel (COS): 1/64 of 1,916,928 MiB = 29,952 MiB, + 16 MiB, + 64 MiB software IO TLB,
    // + the correction capped at 248 MiB.
    let capacity = (1_916_928 - 29_952 - 16 - 64 - 248) * MIB;
    assert_eq!(
        q(&t, "capacity", "memory"),
        format!("{}Ki", capacity / 1024)
    );
    // GKE tiers: 25 % of 4 GiB, 20 % of 4, 10 % of 8, 6 % of 112, 2 % of the rest; 100Mi eviction.
    let machine = 1_916_928 * MIB;
    let reserved = 4 * GIB * 25 / 100
        + 4 * GIB * 20 / 100
        + 8 * GIB * 10 / 100
        + 112 * GIB * 6 / 100
        + (machine - 128 * GIB) * 2 / 100;
    assert_eq!(
        q(&t, "allocatable", "memory"),
        format!("{}Ki", (capacity - reserved - 100 * MIB) / 1024)
    );
    // 60 + 10 + 10 + 204 cores × 2.5m = 590m.
    assert_eq!(q(&t, "allocatable", "cpu"), "207410m");
    // Boot disk less the OS (1.5635 % + 4.148 GiB + 100 MiB buffer), then 10 % nodefs eviction.
    let disk = 200 * GIB;
    let os =
        (disk as f64 * 0.015635).ceil() as u64 + (4.148 * GIB as f64).ceil() as u64 + 100 * MIB;
    let ephemeral = disk - os;
    assert_eq!(
        q(&t, "capacity", "ephemeral-storage"),
        format!("{}Ki", ephemeral / 1024)
    );
    assert_eq!(
        q(&t, "allocatable", "ephemeral-storage"),
        format!("{}Ki", (ephemeral - ephemeral / 10) / 1024)
    );
    // Eight H100s through the NVIDIA DRA driver, the same product the AWS p5 gets.
    let devices = t.resource_slices[0].devices.as_ref().expect("devices");
    assert_eq!(devices.len(), 8);
    let aws = node_template(&p5(), &TemplateOptions::default()).expect("p5");
    let aws_device = &aws.resource_slices[0].devices.as_ref().expect("devices")[0];
    assert_eq!(devices[0].attributes, aws_device.attributes);
    assert_eq!(devices[0].capacity, aws_device.capacity);
}

#[test]
fn gke_kube_reserved_from_the_node_pool_replaces_the_tiers() {
    let options: TemplateOptions =
        serde_saphyr::from_str("kubeReserved: {cpu: 1060m, memory: 9Gi, ephemeral-storage: 41Gi}")
            .expect("yaml");
    let t = node_template_for(Platform::Gke, &a3(), &options).expect("a3");
    assert_eq!(q(&t, "allocatable", "cpu"), "206940m");
}

#[test]
fn a_gpu_memory_override_sizes_an_unknown_accelerator() {
    let mut shape = a3();
    shape.gpus = vec![gce::accelerator_gpus("nvidia-rtx-pro-6000", 8)];
    let options: TemplateOptions = serde_saphyr::from_str(
        "gpu: {productName: NVIDIA RTX PRO 6000 Blackwell Server Edition, architecture: Blackwell, cudaComputeCapability: '12.0', memoryMib: 98304}",
    )
    .expect("yaml");
    let t = node_template_for(Platform::Gke, &shape, &options).expect("template");
    let device = &t.resource_slices[0].devices.as_ref().expect("devices")[0];
    assert_eq!(
        device.capacity.as_ref().expect("capacity")["memory"]
            .value
            .0,
        (98_304u64 << 20).to_string()
    );
}
