//! A snapshot the size of a real cluster's `kubectl get pods -A -o yaml`
//! loads: 10,000 pods are ~25 MB and ~1.5 million YAML nodes, six times the
//! fixed limit that used to refuse it.

#[test]
fn a_10000_pod_kubectl_yaml_loads() {
    let text = dra_benches::kubectl_pods_yaml(10_000);
    assert!(text.len() > 10_000_000, "{} bytes", text.len());
    let mut loader = dra_sim::Loader::new();
    loader.add_yaml("pods.yaml", &text).expect("loads");
    let loaded = loader.finish();
    assert_eq!(loaded.objects.pods.len(), 10_000);
    assert!(loaded.duplicates.is_empty());
}
