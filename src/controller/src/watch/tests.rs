use super::*;

fn ar(group: &str, version: &str, kind: &str) -> ApiResource {
    ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.into()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

#[test]
fn workload_refs_of_1_35_pods_are_kept_by_namespace_and_name() {
    let pod = |name: &str, spec: serde_json::Value| {
        let mut object = DynamicObject::new(name, &ApiResource::erase::<Pod>(&())).within("ml");
        object.data = serde_json::json!({ "spec": spec });
        Arc::new(object)
    };
    let pods = vec![
        pod(
            "w-0",
            serde_json::json!({"workloadRef": {"name": "trainer", "podGroup": "workers"}}),
        ),
        pod("solo", serde_json::json!({"containers": []})),
    ];
    let refs = workload_refs(&pods);
    assert_eq!(refs.len(), 1);
    assert_eq!(
        refs[&("ml".to_string(), "w-0".to_string())]["podGroup"],
        "workers"
    );
}

#[test]
fn untyped_pods_keep_only_their_workload_ref() {
    let mut linked = DynamicObject::new("w-0", &ApiResource::erase::<Pod>(&())).within("ml");
    linked.data = serde_json::json!({
        "spec": {
            "workloadRef": {"name": "trainer", "podGroup": "workers"},
            "containers": [{"name": "main", "image": "trainer:1"}],
        },
        "status": {"phase": "Pending"},
    });
    keep_workload_ref(&mut linked);
    assert_eq!(
        linked.data,
        serde_json::json!({"spec": {"workloadRef": {"name": "trainer", "podGroup": "workers"}}})
    );
    let refs = workload_refs(&[Arc::new(linked)]);
    assert_eq!(
        refs[&("ml".to_string(), "w-0".to_string())]["name"],
        "trainer"
    );

    let mut solo = DynamicObject::new("solo", &ApiResource::erase::<Pod>(&())).within("ml");
    solo.data = serde_json::json!({"spec": {"containers": []}});
    keep_workload_ref(&mut solo);
    assert!(workload_refs(&[Arc::new(solo)]).is_empty());
}

#[test]
fn only_clusters_serving_workload_v1alpha1_watch_untyped_pods() {
    let served = |version: &str| OptionalApis {
        gangs: vec![ApiResource {
            group: "scheduling.k8s.io".into(),
            version: version.into(),
            api_version: format!("scheduling.k8s.io/{version}"),
            kind: "Workload".into(),
            plural: "workloads".into(),
        }],
        device_taint_rules: false,
        stand_ins: Vec::new(),
    };
    assert!(serves_workload_v1alpha1(&served("v1alpha1")));
    assert!(!serves_workload_v1alpha1(&served("v1alpha3")));
    assert!(!serves_workload_v1alpha1(&OptionalApis::default()));
}

#[test]
fn gang_kinds_are_picked_and_others_ignored() {
    let selected = select_optional([
        (
            "scheduling.k8s.io",
            vec![
                ar("scheduling.k8s.io", "v1", "PriorityClass"),
                ar("scheduling.k8s.io", "v1beta1", "Workload"),
                ar("scheduling.k8s.io", "v1beta1", "PodGroup"),
            ],
        ),
        (
            "scheduling.volcano.sh",
            vec![ar("scheduling.volcano.sh", "v1beta1", "PodGroup")],
        ),
        (
            "resource.k8s.io",
            vec![ar("resource.k8s.io", "v1", "ResourceSlice")],
        ),
    ]);
    let kinds: Vec<_> = selected
        .gangs
        .iter()
        .map(|a| (a.group.as_str(), a.kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("scheduling.k8s.io", "PodGroup"),
            ("scheduling.k8s.io", "Workload"),
            ("scheduling.volcano.sh", "PodGroup")
        ]
    );
    assert!(!selected.device_taint_rules);
}

#[test]
fn device_taint_rules_only_at_v1() {
    let beta = select_optional([(
        "resource.k8s.io",
        vec![ar("resource.k8s.io", "v1beta2", "DeviceTaintRule")],
    )]);
    assert!(!beta.device_taint_rules);
    let v1 = select_optional([(
        "resource.k8s.io",
        vec![ar("resource.k8s.io", "v1", "DeviceTaintRule")],
    )]);
    assert!(v1.device_taint_rules);
}
