//! The fake provider serves exactly the NodeGroups the controller plans with: both read a spec
//! through the one validation, `NodeGroupSpec::validate` (which `dra_plan::groups::check` is),
//! for a group given in its config file and for a NodeGroup object alike. A group the controller
//! leaves out (`Valid=False`) is never served, with the controller's own words.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use dra_provider_fake::Config;
use dra_provider_fake::config::ConfigError;
use dra_provider_fake::groups::{Skipped, resolve};
use serde_json::{Value, json};

fn spec(change: &Value) -> Value {
    let mut spec = json!({
        "provider": "fake", "providerID": "gpu", "minSize": 0, "maxSize": 4,
        "capacityType": "on-demand", "pricePerHour": 1.5,
        "template": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}
    });
    merge(&mut spec, change);
    spec
}

fn merge(base: &mut Value, change: &Value) {
    match (base, change) {
        (Value::Object(b), Value::Object(c)) => {
            for (k, v) in c {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (b, c) => *b = c.clone(),
    }
}

/// What the controller says of `spec`: `None` when it plans with it.
fn controller_verdict(spec: &Value) -> Option<String> {
    let spec: dra_api::NodeGroupSpec = serde_json::from_value(spec.clone()).unwrap();
    dra_plan::groups::check(&spec).err().map(|e| e.to_string())
}

#[test]
fn the_fake_provider_refuses_exactly_the_groups_the_controller_refuses() {
    let cases = [
        json!({}),
        json!({"template": {"capacity": {"cpu": "lots"}}}),
        json!({"template": {"allocatable": {"cpu": "7500m", "memory": "1.5.3Gi"}}}),
        json!({"minSize": -1}),
        json!({"minSize": 5}),
        json!({"pricePerHour": -2.0}),
        json!({"capacityType": "reserved"}),
    ];
    for change in &cases {
        let spec = spec(change);
        let controller = controller_verdict(&spec);

        // A group given in full in the config file.
        let file = format!(
            "nodeGroups:\n  - name: gpu\n    spec: {}\n",
            serde_json::to_string(&spec).unwrap()
        );
        match (Config::parse(&file, "test"), &controller) {
            (Ok(_), None) => {}
            (Err(ConfigError::Invalid { group, source }), Some(said)) => {
                assert_eq!(group, "gpu");
                let joined = source
                    .errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ");
                assert_eq!(&joined, said, "{change}");
            }
            (parsed, _) => panic!(
                "{change}: the controller says {controller:?}, the fake provider's config {:?}",
                parsed.map(|_| "serves it")
            ),
        }

        // A NodeGroup object in the API server.
        let object = json!({
            "apiVersion": "dra-autoscaler.io/v1alpha1", "kind": "NodeGroup",
            "metadata": {"name": "gpu-group"}, "spec": spec,
        });
        let resolved = resolve(&Config::parse("{}", "test").unwrap(), &[object]);
        match &controller {
            None => {
                assert!(
                    resolved.groups.contains_key("gpu"),
                    "{change}: {resolved:?}"
                );
                assert!(resolved.skipped.is_empty(), "{change}: {resolved:?}");
            }
            Some(said) => {
                assert!(resolved.groups.is_empty(), "{change}: served {resolved:?}");
                let [Skipped::Invalid { name, source }] = resolved.skipped.as_slice() else {
                    panic!("{change}: {resolved:?}");
                };
                assert_eq!(name, "gpu-group");
                assert_eq!(
                    &source.to_string(),
                    &format!("invalid node group spec: {said}"),
                    "{change}"
                );
            }
        }
    }
}
