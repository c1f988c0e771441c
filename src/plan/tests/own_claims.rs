//! Every reason names the pod's own claims (issue 31, item 3): identical pods of one
//! ResourceClaimTemplate each have a claim of their own, and what the planner learnt about one
//! is never told to another in terms of the first one's claim.

// Test helpers may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use dra_plan::{PlanOptions, plan};
use dra_sim::{FeatureGates, Loader};

#[test]
fn a_refusal_names_the_pods_own_claim_never_another_pods() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/scenarios/086-reasons-name-the-pods-own-claims/cluster.yaml");
    let mut loader = Loader::new();
    loader.keep_kind("dra-autoscaler.io", "NodeGroup");
    loader
        .add_yaml("cluster.yaml", &std::fs::read_to_string(&path).unwrap())
        .unwrap();
    let report = plan(
        loader.finish().objects,
        FeatureGates::default(),
        &PlanOptions::default(),
    );
    for (pod, own, other) in [
        ("default/a", "default/a-g", "default/b-g"),
        ("default/b", "default/b-g", "default/a-g"),
    ] {
        let reasons = &report.pods.iter().find(|p| p.pod == pod).unwrap().reasons;
        let text = reasons.join("; ");
        assert!(text.contains(&format!("claim {own}")), "{pod}: {text}");
        assert!(!text.contains(other), "{pod} is told about {other}: {text}");
        let group = &report
            .pod_groups
            .iter()
            .find(|g| g.pod_group.to_string() == pod)
            .unwrap()
            .reasons;
        assert!(!group.join("; ").contains(other), "{pod}: {group:?}");
    }
}
