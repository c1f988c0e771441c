//! `Snapshot::check_fit` answers as `Snapshot::check` does (same verdict,
//! same refusal code and plugin) without spelling the refusal out.

use dra_sim::reason::Code;
use dra_sim::snapshot::{Snapshot, Verdict};
use dra_sim::{FeatureGates, Loader};

const CLUSTER: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: small, labels: {kubernetes.io/hostname: small}}
status:
  allocatable: {cpu: "1", memory: 4Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata: {name: tainted, labels: {kubernetes.io/hostname: tainted}}
spec:
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: v1
kind: Node
metadata: {name: roomy, labels: {kubernetes.io/hostname: roomy}}
status:
  allocatable: {cpu: "8", memory: 32Gi, pods: "110"}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default, uid: u-web}
spec:
  containers:
  - name: main
    image: nginx
    resources:
      requests: {cpu: "2", memory: 1Gi}
"#;

#[test]
fn check_fit_gives_checks_verdict_and_code_without_words() {
    let mut loader = Loader::new();
    loader
        .add_yaml("cluster.yaml", CLUSTER)
        .expect("valid YAML");
    let mut s = Snapshot::new(loader.finish().objects, FeatureGates::default());
    let pod = 0;
    let claims = s.resolve_claims(pod).expect("claims");
    // Upstream: 2 CPUs do not fit in 1 (NodeResourcesFit), an untolerated
    // NoSchedule taint refuses (TaintToleration), 8 free CPUs fit.
    for (node, expected) in [
        ("small", Some(Code::InsufficientResources)),
        ("tainted", Some(Code::UntoleratedTaint)),
        ("roomy", None),
    ] {
        let n = s.node_index(node).expect("node");
        let full = s.check(pod, n, &claims);
        let quick = s.check_fit(pod, n, &claims);
        match (full, quick, expected) {
            (Verdict::Fits(a), Verdict::Fits(b), None) => assert_eq!(a, b, "{node}"),
            (Verdict::Refused(full), Verdict::Refused(quick), Some(code)) => {
                assert_eq!(full.code, code, "{node}");
                assert_eq!(quick.code, code, "{node}");
                assert_eq!(quick.plugin, full.plugin, "{node}");
                assert_eq!(full.node.as_deref(), Some(node), "check names the node");
                assert_eq!(quick.node, None, "check_fit leaves the node out");
                assert!(!full.to_string().is_empty(), "check spells it out");
            }
            (full, quick, expected) => {
                panic!("{node}: check {full:?}, check_fit {quick:?}, expected {expected:?}")
            }
        }
    }
}
