//! Gang detection per API flavour, from the upstream semantics in the spec
//! digest §7 (Workload/PodGroup, coscheduling, Volcano, Kueue).

// Test helpers may unwrap: a failure is the test failing.
#![allow(clippy::unwrap_used)]

use dra_plan::gang::{GANG_KINDS, Gang, GangApi, GangRef, detect_gangs};
use dra_sim::ObjectRef;
use dra_sim::pods::is_pending;
use dra_sim::{FeatureGates, Loader};

fn gates() -> FeatureGates {
    let mut gates = FeatureGates::default();
    gates
        .apply_flag("GenericWorkload=true,TopologyAwareWorkloadScheduling=true")
        .unwrap();
    gates
}

fn gangs(yaml: &str) -> Vec<Gang> {
    gangs_with(yaml, &gates())
}

fn gangs_with(yaml: &str, gates: &FeatureGates) -> Vec<Gang> {
    let mut loader = Loader::new();
    for (group, kind) in GANG_KINDS {
        loader.keep_kind(group, kind);
    }
    loader.add_yaml("test.yaml", yaml).unwrap();
    let objects = loader.finish().objects;
    let pending: Vec<usize> = (0..objects.pods.len())
        .filter(|&i| is_pending(&objects.pods[i]))
        .collect();
    detect_gangs(
        &objects.pods,
        &pending,
        &objects.extra,
        &objects.pod_workload_refs,
        gates,
    )
}

fn pod(name: &str, extra_meta: &str, extra_spec: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: ml\n{extra_meta}spec:\n  containers: [{{name: c, image: x}}]\n{extra_spec}"
    )
}

const POD_GROUP_4: &str = r"
apiVersion: scheduling.k8s.io/v1alpha3
kind: PodGroup
metadata: {name: trainer-workers-0, namespace: ml}
spec:
  workloadRef: {workloadName: trainer, templateName: workers}
  schedulingPolicy: {gang: {minCount: 4}}
  schedulingConstraints:
    topology: [{key: example.com/rack}]
";

fn upstream_members(count: usize) -> String {
    let mut yaml = POD_GROUP_4.to_string();
    for i in 0..count {
        yaml += &pod(
            &format!("worker-{i}"),
            "",
            "  schedulingGroup: {podGroupName: trainer-workers-0}\n",
        );
    }
    yaml
}

#[test]
fn upstream_pod_group_with_all_members_is_one_gang_with_its_topology() {
    let found = gangs(&upstream_members(4));
    assert_eq!(found.len(), 1);
    let gang = &found[0];
    assert_eq!(gang.api, GangApi::PodGroup);
    assert_eq!(gang.name.to_string(), "ml/trainer-workers-0");
    assert_eq!(
        (gang.min_count, gang.pending.len(), gang.needed()),
        (4, 4, 4)
    );
    assert_eq!(gang.topology_key.as_deref(), Some("example.com/rack"));
    assert_eq!(gang.blocked, None);
}

#[test]
fn an_under_populated_gang_is_blocked() {
    let found = gangs(&upstream_members(3));
    assert_eq!(found.len(), 1);
    let reason = found[0].blocked.as_deref().unwrap();
    assert!(reason.contains("3 of its minimum 4"), "{reason}");
}

#[test]
fn a_missing_pod_group_blocks_its_pods() {
    let yaml = pod("w", "", "  schedulingGroup: {podGroupName: nowhere}\n");
    let found = gangs(&yaml);
    assert!(found[0].blocked.as_deref().unwrap().contains("not found"));
}

#[test]
fn basic_policy_members_are_scheduled_one_by_one() {
    let mut yaml = "apiVersion: scheduling.k8s.io/v1alpha3\nkind: PodGroup\nmetadata: {name: g, namespace: ml}\nspec:\n  schedulingPolicy: {basic: {}}\n".to_string();
    yaml += &pod("a", "", "  schedulingGroup: {podGroupName: g}\n");
    yaml += &pod("b", "", "  schedulingGroup: {podGroupName: g}\n");
    let found = gangs(&yaml);
    assert_eq!(found.len(), 2);
    assert!(
        found
            .iter()
            .all(|g| g.api == GangApi::Single && g.blocked.is_none())
    );
}

#[test]
fn workload_v1alpha1_with_workload_ref_from_1_35() {
    let mut yaml = "apiVersion: scheduling.k8s.io/v1alpha1\nkind: Workload\nmetadata: {name: trainer, namespace: ml}\nspec:\n  podGroups:\n  - name: workers\n    policy: {gang: {minCount: 2}}\n".to_string();
    for i in 0..2 {
        yaml += &pod(
            &format!("w{i}"),
            "",
            "  workloadRef: {name: trainer, podGroup: workers}\n",
        );
    }
    let found = gangs(&yaml);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].api, GangApi::Workload);
    assert_eq!(found[0].min_count, 2);
    assert_eq!(found[0].blocked, None);
    // The gang is the Workload's pod group; the object is the Workload.
    assert_eq!(found[0].name.object, ObjectRef::new("ml", "trainer"));
    assert_eq!(found[0].name.to_string(), "ml/trainer/workers");
}

#[test]
fn workload_replicas_of_one_pod_group_are_separate_gangs() {
    let mut yaml = "apiVersion: scheduling.k8s.io/v1alpha1\nkind: Workload\nmetadata: {name: trainer, namespace: ml}\nspec:\n  podGroups:\n  - name: workers\n    policy: {gang: {minCount: 2}}\n".to_string();
    for replica in ["r0", "r1"] {
        for i in 0..2 {
            yaml += &pod(
                &format!("{replica}-w{i}"),
                "",
                &format!(
                    "  workloadRef: {{name: trainer, podGroup: workers, podGroupReplicaKey: {replica}}}\n"
                ),
            );
        }
    }
    let found = gangs(&yaml);
    let names: Vec<String> = found.iter().map(|g| g.name.to_string()).collect();
    assert_eq!(names, ["ml/trainer/workers/r0", "ml/trainer/workers/r1"]);
    // Each replica takes the pod group's policy, and is whole on its own.
    assert!(
        found
            .iter()
            .all(|g| g.min_count == 2 && g.blocked.is_none())
    );
}

#[test]
fn coscheduling_counts_bound_members_towards_min_member() {
    let mut yaml = "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: pg, namespace: ml}\nspec: {minMember: 3}\n".to_string();
    yaml += &pod(
        "a",
        "  labels: {scheduling.x-k8s.io/pod-group: pg}\n",
        "  nodeName: node-1\n",
    );
    yaml += &pod("b", "  labels: {scheduling.x-k8s.io/pod-group: pg}\n", "");
    yaml += &pod("c", "  labels: {scheduling.x-k8s.io/pod-group: pg}\n", "");
    let found = gangs(&yaml);
    assert_eq!(found.len(), 1);
    let gang = &found[0];
    assert_eq!(gang.api, GangApi::Coscheduling);
    assert_eq!((gang.bound, gang.pending.len(), gang.needed()), (1, 2, 2));
    assert_eq!(gang.blocked, None);
}

#[test]
fn volcano_annotation_links_to_its_pod_group() {
    let mut yaml = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {name: job-a, namespace: ml}\nspec: {minMember: 2}\n".to_string();
    yaml += &pod(
        "a",
        "  annotations: {scheduling.k8s.io/group-name: job-a}\n",
        "",
    );
    yaml += &pod(
        "b",
        "  annotations: {scheduling.k8s.io/group-name: job-a}\n",
        "",
    );
    let found = gangs(&yaml);
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].api, found[0].min_count), (GangApi::Volcano, 2));
}

#[test]
fn kueue_groups_take_their_size_from_the_total_count_annotation() {
    let meta = "  labels: {kueue.x-k8s.io/pod-group-name: g1}\n  annotations: {kueue.x-k8s.io/pod-group-total-count: \"3\"}\n";
    let mut yaml = pod("a", meta, "");
    yaml += &pod("b", meta, "");
    let found = gangs(&yaml);
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].api, found[0].min_count), (GangApi::Kueue, 3));
    assert!(
        found[0]
            .blocked
            .as_deref()
            .unwrap()
            .contains("2 of its minimum 3")
    );
}

#[test]
fn gated_members_block_the_gang_and_gated_singles_too() {
    let meta = "  labels: {kueue.x-k8s.io/pod-group-name: g1}\n  annotations: {kueue.x-k8s.io/pod-group-total-count: \"2\"}\n";
    let gate = "  schedulingGates: [{name: kueue.x-k8s.io/admission}]\n";
    let mut yaml = pod("a", meta, gate);
    yaml += &pod("b", meta, gate);
    yaml += &pod("solo", "", gate);
    let found = gangs(&yaml);
    assert_eq!(found.len(), 2);
    assert!(
        found[0]
            .blocked
            .as_deref()
            .unwrap()
            .contains("scheduling-gated")
    );
    assert!(
        found[1]
            .blocked
            .as_deref()
            .unwrap()
            .contains("scheduling-gated")
    );
}

#[test]
fn pods_in_no_group_are_gangs_of_one() {
    let found = gangs(&(pod("a", "", "") + &pod("b", "", "")));
    assert_eq!(found.len(), 2);
    assert!(
        found
            .iter()
            .all(|g| g.api == GangApi::Single && g.min_count == 1)
    );
}

#[test]
fn upstream_gangs_need_the_scheduler_gates() {
    // 1.37 defaults: GenericWorkload is beta but off, so the scheduler places
    // these pods one by one.
    let found = gangs_with(&upstream_members(4), &FeatureGates::default());
    assert_eq!(found.len(), 4);
    assert!(found.iter().all(|g| g.api == GangApi::Single));
    // Gang on, topology off: one gang without its topology constraint.
    let mut gates = FeatureGates::default();
    gates.apply_flag("GenericWorkload=true").unwrap();
    let found = gangs_with(&upstream_members(4), &gates);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].topology_key, None);
    // 1.36 needs GangScheduling too.
    let mut gates = FeatureGates::for_version("1.36".parse().unwrap());
    gates.apply_flag("GenericWorkload=true").unwrap();
    assert_eq!(gangs_with(&upstream_members(4), &gates).len(), 4);
}

#[test]
fn gang_api_names_are_the_report_contract_and_parse_back() {
    let names: Vec<&str> = GangApi::ALL.iter().map(|a| a.as_str()).collect();
    assert_eq!(
        names,
        [
            "single",
            "pod-group",
            "workload",
            "coscheduling",
            "volcano",
            "kueue",
            "provisioning-request",
            "capacity-buffer"
        ]
    );
    for api in GangApi::ALL {
        let json = serde_json::to_value(api).unwrap();
        assert_eq!(json, serde_json::json!(api.as_str()));
        assert_eq!(serde_json::from_value::<GangApi>(json).unwrap(), api);
        assert_eq!(api.as_str().parse::<GangApi>().unwrap(), api);
    }
    assert!("gang".parse::<GangApi>().is_err());
}

#[test]
fn every_gang_kind_belongs_to_one_api() {
    for &(group, kind) in GANG_KINDS {
        let api = GangApi::of_kind(group, kind).unwrap();
        assert!(api.object_kinds().contains(&(group, kind)));
    }
    assert_eq!(
        GangApi::of_kind("scheduling.sigs.k8s.io", "PodGroup"),
        Some(GangApi::Coscheduling)
    );
    assert_eq!(GangApi::of_kind("batch", "Job"), None);
}

#[test]
fn gang_refs_print_and_parse_as_the_report_writes_them() {
    let workload = GangRef {
        object: ObjectRef::new("ml", "trainer"),
        pod_group: Some("workers".into()),
        replica_key: Some("r1".into()),
    };
    for (gang, text) in [
        (GangRef::object(ObjectRef::new("ml", "pg")), "ml/pg"),
        (workload, "ml/trainer/workers/r1"),
    ] {
        assert_eq!(gang.to_string(), text);
        assert_eq!(
            serde_json::to_value(&gang).unwrap(),
            serde_json::json!(text)
        );
        assert_eq!(text.parse::<GangRef>().unwrap(), gang);
    }
}
