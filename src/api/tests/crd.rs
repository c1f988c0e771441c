//! The generated CRD has the names, scope and printer columns the issue asks for.

// Helpers outside #[test] fns are test code too; clippy.toml only covers the fns themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn crd_is_cluster_scoped_with_short_name_and_columns() {
    let crd = dra_api::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("nodegroups.dra-autoscaler.io")
    );
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.names.kind, "NodeGroup");
    assert_eq!(
        crd.spec.names.short_names.as_deref(),
        Some(&["ng".to_owned()][..])
    );
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    assert!(version.subresources.as_ref().unwrap().status.is_some());
    let columns: Vec<_> = version
        .additional_printer_columns
        .as_ref()
        .unwrap()
        .iter()
        .map(|c| (c.name.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        vec![
            ("Capacity", ".spec.capacityType"),
            ("Min", ".spec.minSize"),
            ("Max", ".spec.maxSize"),
            ("Current", ".status.currentSize"),
            ("Target", ".status.targetSize"),
            ("Upcoming", ".status.upcomingSize"),
            ("Reserved Left", ".status.reservedLeft"),
            ("Backoff Until", ".status.backoffUntil"),
        ]
    );
}

#[test]
fn crd_yaml_round_trips_and_carries_the_spec_schema() {
    let yaml = dra_api::crd_yaml().unwrap();
    let back: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(back, dra_api::crd());
    let schema = serde_json::to_value(&back.spec.versions[0].schema).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
    let required: Vec<&str> = spec["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for field in [
        "provider",
        "providerID",
        "minSize",
        "maxSize",
        "capacityType",
        "pricePerHour",
        "template",
    ] {
        assert!(
            required.contains(&field),
            "{field} not required: {required:?}"
        );
    }
    let capacity_types = &spec["properties"]["capacityType"]["enum"];
    assert_eq!(
        capacity_types,
        &serde_json::json!(["reserved", "on-demand", "spot"])
    );
    assert!(spec["properties"]["template"]["properties"]["resourceSlices"]["items"]["properties"]["devices"].is_object());
}
