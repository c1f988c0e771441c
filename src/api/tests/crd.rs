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

#[test]
fn backoff_until_prints_the_time_not_an_age() {
    // kubectl prints a `date` column as the time since the value (`5m`), and a time ahead of
    // now, as a backoff's end is, as `<invalid>`; a `string` column prints the value itself.
    let crd = dra_api::crd();
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .unwrap();
    let backoff = columns
        .iter()
        .find(|c| c.json_path == ".status.backoffUntil")
        .unwrap();
    assert_eq!(backoff.name, "Backoff Until");
    assert_eq!(backoff.type_, "string");
}

fn spec_schema() -> serde_json::Value {
    let crd = dra_api::crd();
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    schema["openAPIV3Schema"]["properties"]["spec"].clone()
}

#[test]
fn the_schema_refuses_negative_sizes_and_prices() {
    // What `NodeGroupSpec::validate` refuses and a schema can say: the API server refuses it at
    // admission instead of the controller one loop later.
    let spec = spec_schema();
    let properties = &spec["properties"];
    for field in ["minSize", "maxSize", "pricePerHour"] {
        assert_eq!(
            properties[field]["minimum"], 0.0,
            "{field}: {}",
            properties[field]
        );
    }
    assert_eq!(
        properties["reservation"]["properties"]["total"]["minimum"],
        0.0
    );
    let threshold = &properties["scaleDown"]["properties"]["utilizationThreshold"];
    assert_eq!(
        (threshold["minimum"].as_f64(), threshold["maximum"].as_f64()),
        (Some(0.0), Some(1.0)),
        "{threshold}"
    );
}

#[test]
fn the_schema_refuses_template_values_that_are_not_quantities() {
    let spec = spec_schema();
    let template = &spec["properties"]["template"]["properties"];
    for field in ["capacity", "allocatable"] {
        let values = &template[field]["additionalProperties"];
        // An int or a string (k8s-openapi's Quantity schema), the string matching the pattern.
        assert_eq!(
            values["x-kubernetes-int-or-string"], true,
            "{field}: {values}"
        );
        let pattern = regex::Regex::new(values["pattern"].as_str().unwrap()).unwrap();
        // resource.Quantity's grammar (apimachinery's quantity.go) accepts these ...
        for good in [
            "4", "64Gi", "191450m", "1.5", ".5", "5.", "+1", "-1", "1e3", "1E-3", "2Ti", "7600Gi",
        ] {
            assert!(pattern.is_match(good), "{field}: {good} refused");
        }
        // ... and refuses these.
        for bad in ["lots", "1.5.3Gi", "4 Gi", "", "1GB", "Gi", "0x10", "1e"] {
            assert!(!pattern.is_match(bad), "{field}: {bad} accepted");
        }
    }
    // The controller's parser (as apimachinery's ParseQuantity) agrees with the pattern on
    // every case above but a bare suffix: ParseQuantity("Gi") is 0 without an error (checked
    // against k8s.io/apimachinery v0.37.2), which the pattern, as controller-tools', refuses.
    for good in [
        "4", "64Gi", "191450m", "1.5", ".5", "5.", "+1", "-1", "1e3", "1E-3", "Gi",
    ] {
        assert!(dra_sim::quantity::nano_value(good).is_ok(), "{good}");
    }
    for bad in ["lots", "1.5.3Gi", "4 Gi", "", "1GB", "0x10", "1e"] {
        assert!(dra_sim::quantity::nano_value(bad).is_err(), "{bad}");
    }
}

#[test]
fn status_conditions_are_a_map_list_keyed_by_type() {
    // As upstream declares `conditions` (metav1.Condition lists are
    // `+listType=map` / `+listMapKey=type`), so server-side apply owns them one by one.
    let crd = dra_api::crd();
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    let conditions = &schema["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"];
    assert_eq!(conditions["type"], "array", "{conditions}");
    assert_eq!(conditions["x-kubernetes-list-type"], "map", "{conditions}");
    assert_eq!(
        conditions["x-kubernetes-list-map-keys"],
        serde_json::json!(["type"]),
        "{conditions}"
    );
    // A map key must be required in each item.
    let required = conditions["items"]["required"].as_array().unwrap();
    assert!(
        required.contains(&serde_json::json!("type")),
        "{conditions}"
    );
}
