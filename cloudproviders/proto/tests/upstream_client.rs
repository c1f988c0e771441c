//! Our answers as cluster-autoscaler reads them: a provider built from the shared answers
//! every provider gives (templates through `dra_api::new_node`, `group_options`, `gpu`) is
//! served on loopback and the Go tests in `upstream-go/` call it with grpc-go, the message
//! schema of upstream's `externalgrpc.proto` (`upstream/`, compiled here with protox) and
//! k8s.io/api's protobuf decoding. Needs `go` on the PATH and the Go module proxy (or a warm
//! module cache); the Go side's expectations are in `upstream-go/upstream_test.go`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dra_api::NodeGroupSpec;
use dra_provider::{
    AutoscalingOptions, CloudProvider, Instance, NodeGroupRef, NodeRef, ProviderError,
    ServeOptions, TemplateNode, gpu, group_options, unknown_group,
};
use k8s_openapi::api::resource::v1::ResourceSlice;

/// The usual GPU label of this provider (GPU feature discovery's).
const PRODUCT_LABEL: &str = "nvidia.com/gpu.product";

struct Upstream {
    groups: BTreeMap<String, NodeGroupSpec>,
    /// What group "gpu" serves as its template's slices (`testdata/upstream/template-slices.yaml`).
    gpu_slices: Vec<ResourceSlice>,
}

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn slices_path() -> PathBuf {
    manifest_dir().join("testdata/upstream/template-slices.yaml")
}

fn spec(template: serde_json::Value, scale_down: Option<serde_json::Value>) -> NodeGroupSpec {
    let mut spec = serde_json::json!({
        "provider": "fake", "providerID": "x", "minSize": 0, "maxSize": 8,
        "capacityType": "on-demand", "pricePerHour": 1.0, "template": template,
    });
    if let Some(scale_down) = scale_down {
        spec["scaleDown"] = scale_down;
    }
    serde_json::from_value(spec).unwrap()
}

impl Upstream {
    fn new() -> Self {
        let cpu = serde_json::json!({"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}});
        let groups = BTreeMap::from([
            // GPUs as DRA devices only, with the product label GPU feature discovery sets.
            (
                "gpu".to_owned(),
                spec(
                    serde_json::json!({
                        "labels": {(PRODUCT_LABEL): "NVIDIA-H100-80GB-HBM3"},
                        "capacity": {"cpu": "192", "memory": "2Ti", "pods": "110"},
                    }),
                    None,
                ),
            ),
            // GPUs through the device plugin.
            (
                "plugin".to_owned(),
                spec(
                    serde_json::json!({
                        "labels": {(PRODUCT_LABEL): "NVIDIA-A100-SXM4-80GB"},
                        "capacity": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
                    }),
                    None,
                ),
            ),
            (
                "tuned".to_owned(),
                spec(
                    cpu.clone(),
                    Some(serde_json::json!({"utilizationThreshold": 0.3, "unneededTime": "20m"})),
                ),
            ),
            ("plain".to_owned(), spec(cpu.clone(), None)),
            (
                "frozen".to_owned(),
                spec(cpu.clone(), Some(serde_json::json!({"enabled": false}))),
            ),
            ("stockout".to_owned(), spec(cpu.clone(), None)),
            ("quota".to_owned(), spec(cpu.clone(), None)),
            ("throttled".to_owned(), spec(cpu, None)),
        ]);
        let text = std::fs::read_to_string(slices_path()).unwrap();
        let gpu_slices = serde_saphyr::from_str_multiple::<ResourceSlice, Vec<_>>(&text).unwrap();
        Self { groups, gpu_slices }
    }

    fn spec(&self, id: &str) -> Result<&NodeGroupSpec, ProviderError> {
        self.groups.get(id).ok_or_else(|| unknown_group(id))
    }
}

#[tonic::async_trait]
impl CloudProvider for Upstream {
    async fn node_groups(&self) -> Result<Vec<NodeGroupRef>, ProviderError> {
        Ok(self
            .groups
            .iter()
            .map(|(id, spec)| NodeGroupRef {
                id: id.clone(),
                min_size: spec.min_size,
                max_size: spec.max_size,
                debug: String::new(),
            })
            .collect())
    }

    async fn node_group_for_node(
        &self,
        _: &NodeRef,
    ) -> Result<Option<NodeGroupRef>, ProviderError> {
        Ok(None)
    }

    async fn gpu_label(&self) -> Result<String, ProviderError> {
        Ok(gpu::gpu_label(
            PRODUCT_LABEL,
            self.groups.values().map(|s| &s.template),
        ))
    }

    async fn available_gpu_types(&self) -> Result<Vec<String>, ProviderError> {
        let label = self.gpu_label().await?;
        Ok(gpu::gpu_types(
            &label,
            self.groups.values().map(|s| &s.template),
        ))
    }

    async fn target_size(&self, id: &str) -> Result<i32, ProviderError> {
        self.spec(id).map(|_| 0)
    }

    async fn increase_size(&self, id: &str, _: i32) -> Result<(), ProviderError> {
        self.spec(id)?;
        match id {
            "stockout" => Err(ProviderError::OutOfCapacity {
                code: "InsufficientInstanceCapacity".into(),
                message: "no p5.48xlarge in us-east-1a".into(),
                rolled_back: 2,
            }),
            "quota" => Err(ProviderError::Quota {
                code: "QUOTA_EXCEEDED".into(),
                message: "GPUS_ALL_REGIONS is 8".into(),
            }),
            "throttled" => Err(ProviderError::NotStarted {
                message: "RequestLimitExceeded before any instance".into(),
            }),
            _ => Ok(()),
        }
    }

    async fn delete_nodes(&self, id: &str, _: &[NodeRef]) -> Result<(), ProviderError> {
        self.spec(id).map(drop)
    }

    async fn decrease_target_size(&self, id: &str, _: i32) -> Result<(), ProviderError> {
        self.spec(id).map(drop)
    }

    async fn nodes(&self, id: &str) -> Result<Vec<Instance>, ProviderError> {
        self.spec(id).map(|_| Vec::new())
    }

    async fn template_node(&self, id: &str) -> Result<TemplateNode, ProviderError> {
        let made = dra_api::new_node(id, self.spec(id)?, &format!("{id}-template"));
        Ok(TemplateNode {
            node: made.node,
            resource_slices: if id == "gpu" {
                self.gpu_slices.clone()
            } else {
                made.slices
            },
        })
    }

    async fn options(
        &self,
        id: &str,
        defaults: &AutoscalingOptions,
    ) -> Result<Option<AutoscalingOptions>, ProviderError> {
        group_options::options_for(id, self.spec(id)?, defaults)
    }
}

/// The upstream proto (its `externalgrpc.proto` wins over ours: the `upstream/` include comes
/// first) and our `extensions.proto` for the ScaleUpError detail, with the well-known types.
fn descriptor_set(dir: &Path) -> PathBuf {
    let root = manifest_dir();
    let mut compiler = protox::Compiler::new([root.join("upstream"), root.join("proto")]).unwrap();
    compiler.include_imports(true);
    compiler
        .open_files(["externalgrpc.proto", "extensions.proto"])
        .unwrap();
    let upstream = compiler
        .files()
        .find(|f| f.name() == "externalgrpc.proto")
        .expect("externalgrpc.proto compiled");
    assert!(
        upstream
            .path()
            .is_some_and(|p| p.starts_with(root.join("upstream"))),
        "the schema is upstream's, not ours: {:?}",
        upstream.path()
    );
    let path = dir.join("externalgrpc.fds");
    std::fs::write(&path, compiler.encode_file_descriptor_set()).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn grpc_go_with_the_upstream_schema_reads_our_answers() {
    let running = common::start(Arc::new(Upstream::new()), ServeOptions::default()).await;
    let scratch = tempfile::tempdir().unwrap();
    let descriptors = descriptor_set(scratch.path());
    let addr = running.addr.to_string();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("go")
            .args(["test", "-count=1", "-v", "./..."])
            .current_dir(manifest_dir().join("upstream-go"))
            .env("GOTOOLCHAIN", "local")
            .env("EXTERNALGRPC_ADDR", addr)
            .env("EXTERNALGRPC_DESCRIPTORS", &descriptors)
            .env("EXTERNALGRPC_SLICES", slices_path())
            .output()
    })
    .await
    .unwrap()
    .expect("`go` on the PATH (Go 1.26; see docs/testing.md)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "go test failed:\n{stdout}\n{stderr}"
    );
    for test in [
        "TestScaleUpErrorsReachGrpcGoAsSent",
        "TestTemplateNodeInfoCarriesTheTemplateSlices",
        "TestGetOptionsAnswersFromTheNodeGroupSpec",
        "TestGPUAnswersAgreeWithTheTemplates",
    ] {
        assert!(
            stdout.contains(&format!("--- PASS: {test} ")),
            "{test} did not pass (skipped?):\n{stdout}"
        );
    }
    running.shutdown().await;
}
