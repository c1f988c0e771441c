//! `Snapshot::unbind`: a bound pod leaves its node — resources, host ports, affinity counts,
//! and the devices of claims no other pod holds — so a drain simulation can place it elsewhere;
//! a rollback restores everything.

use dra_sim::snapshot::{Snapshot, Verdict};
use dra_sim::{FeatureGates, Loader};

fn snapshot(yaml: &str) -> Snapshot {
    let mut loader = Loader::new();
    loader.add_yaml("test.yaml", yaml).expect("valid YAML");
    Snapshot::new(loader.finish().objects, FeatureGates::default())
}

fn index(s: &Snapshot, pod: &str) -> usize {
    s.pods()
        .iter()
        .position(|p| p.metadata.name.as_deref() == Some(pod))
        .expect("pod")
}

fn fits(s: &mut Snapshot, pod: &str, node: &str) -> bool {
    let p = index(s, pod);
    let n = s.node_index(node).expect("node");
    let claims = s.resolve_claims(p).expect("claims");
    matches!(s.check(p, n, &claims), Verdict::Fits(_))
}

const GPUS: &str = r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata: {name: node-b, labels: {kubernetes.io/hostname: node-b}}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-b-gpus}
spec:
  driver: gpu.example.com
  nodeName: node-b
  pool: {name: node-b, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
---
apiVersion: v1
kind: Pod
metadata: {name: trainer, namespace: ml, uid: u-trainer}
spec:
  nodeName: node-a
  containers:
  - name: main
    resources:
      requests: {cpu: "3"}
      claims: [{name: gpu}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
status:
  phase: Running
  resourceClaimStatuses: [{name: gpu, resourceClaimName: trainer-gpu}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: trainer-gpu
  namespace: ml
  annotations: {resource.kubernetes.io/pod-claim-name: gpu}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: trainer, uid: u-trainer, controller: true}]
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: node-a, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms:
      - matchFields: [{key: metadata.name, operator: In, values: [node-a]}]
  reservedFor: [{resource: pods, name: trainer, uid: u-trainer}]
---
apiVersion: v1
kind: Pod
metadata: {name: other, namespace: ml, uid: u-other}
spec:
  containers:
  - name: main
    resources:
      requests: {cpu: "2"}
      claims: [{name: gpu}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
"#;

#[test]
fn an_unbound_pod_frees_its_node_and_devices_and_can_land_elsewhere() {
    let mut s = snapshot(GPUS);
    // node-a's only GPU and 3 of its 4 CPUs are the trainer's.
    assert!(!fits(&mut s, "other", "node-a"));
    let checkpoint = s.checkpoint();
    let trainer = index(&s, "trainer");
    s.unbind(trainer).expect("bound");
    assert_eq!(s.pod_node(trainer), None);
    let claims = s.resolve_claims(trainer).expect("claims");
    assert!(claims.allocated.is_empty(), "its claim lost its allocation");
    assert_eq!(claims.to_allocate.len(), 1);
    assert!(fits(&mut s, "other", "node-a"), "CPUs and the GPU are free");

    // It moves to node-b, taking that GPU: then nothing is left there for another pod.
    let b = s.node_index("node-b").expect("node-b");
    let Verdict::Fits(allocations) = s.check(trainer, b, &claims) else {
        panic!("the trainer fits on node-b");
    };
    s.bind(trainer, b, &claims, allocations);
    assert!(!fits(&mut s, "other", "node-b"));

    s.rollback(checkpoint);
    assert_eq!(s.pod_node(trainer), s.node_index("node-a"));
    let claims = s.resolve_claims(trainer).expect("claims");
    assert_eq!(claims.allocated.len(), 1, "allocated again on node-a");
    assert!(!fits(&mut s, "other", "node-a"));
    assert!(fits(&mut s, "other", "node-b"));
}

#[test]
fn an_unbound_pod_no_longer_counts_for_anti_affinity_until_rolled_back() {
    let yaml = r#"
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status:
  allocatable: {cpu: "8", pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: ml, labels: {app: web}}
spec:
  nodeName: node-a
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: web}}
        topologyKey: kubernetes.io/hostname
  containers: [{name: main, ports: [{containerPort: 80, hostPort: 8080}]}]
status: {phase: Running}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: ml, labels: {app: web}}
spec:
  containers: [{name: main, ports: [{containerPort: 80, hostPort: 8080}]}]
"#;
    let mut s = snapshot(yaml);
    assert!(
        !fits(&mut s, "web-1", "node-a"),
        "anti-affinity and the host port"
    );
    let checkpoint = s.checkpoint();
    let web0 = index(&s, "web-0");
    s.unbind(web0).expect("bound");
    assert!(fits(&mut s, "web-1", "node-a"));
    s.rollback(checkpoint);
    assert!(!fits(&mut s, "web-1", "node-a"));
    let err = s
        .unbind(index(&s, "web-1"))
        .expect_err("a pending pod is not bound");
    assert_eq!(err.0.name, "web-1", "the error names the pod");
}
