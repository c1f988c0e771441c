//! A small generated cluster — devices with attributes and capacity, claims
//! with counts, `All`, selectors, `firstAvailable` and constraints — is loaded
//! and simulated: nothing panics, every pass ends within the work budget, and
//! no device is handed out twice.
#![no_main]

use std::collections::BTreeSet;
use std::fmt::Write;

use arbitrary::{Result, Unstructured};
use dra_sim::report::Outcome;
use libfuzzer_sys::fuzz_target;

const SELECTORS: [&str; 6] = [
    r#"device.attributes["gpu.example.com"].g == 1"#,
    r#"device.attributes["gpu.example.com"].model == "A""#,
    r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0"#,
    r#"device.attributes["gpu.example.com"].g > 0 && device.attributes["gpu.example.com"].g < 3"#,
    "true",
    r#"device.attributes["gpu.example.com"].missing"#,
];

fn cluster(u: &mut Unstructured<'_>) -> Result<String> {
    let mut y = String::new();
    let nodes = u.int_in_range(1..=2)?;
    for n in 0..nodes {
        let _ = write!(
            y,
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: node-{n}, labels: {{kubernetes.io/hostname: node-{n}}}}}\nstatus: {{allocatable: {{cpu: '8', memory: 64Gi, pods: '110'}}}}\n"
        );
        let _ = write!(
            y,
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: slice-{n}}}\nspec:\n  driver: gpu.example.com\n  nodeName: node-{n}\n  pool: {{name: node-{n}, generation: 1, resourceSliceCount: 1}}\n  devices:\n"
        );
        for d in 0..u.int_in_range(1..=12)? {
            let g = u.int_in_range(0..=3)?;
            let model = if u.arbitrary()? { "A" } else { "B" };
            let memory = *u.choose(&["10Gi", "20Gi", "40Gi"])?;
            let _ = write!(
                y,
                "  - name: gpu-{d}\n    attributes: {{g: {{int: {g}}}, model: {{string: {model}}}}}\n    capacity: {{memory: {{value: {memory}}}}}\n"
            );
        }
    }
    y.push_str("---\napiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\nspec:\n  selectors:\n  - cel: {expression: 'device.driver == \"gpu.example.com\"'}\n");
    let claims = u.int_in_range(1..=3)?;
    for c in 0..claims {
        let _ = write!(
            y,
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: claim-{c}, namespace: default}}\nspec:\n  devices:\n    requests:\n"
        );
        let requests = u.int_in_range(1..=3)?;
        for r in 0..requests {
            let _ = write!(y, "    - name: r{r}\n");
            let alternatives = if u.ratio(1, 4)? { u.int_in_range(1..=3)? } else { 0 };
            let indent = if alternatives > 0 {
                y.push_str("      firstAvailable:\n");
                "        "
            } else {
                y.push_str("      exactly:\n");
                "        "
            };
            for a in 0..alternatives.max(1) {
                let prefix = if alternatives > 0 {
                    let _ = write!(y, "      - name: s{a}\n");
                    indent
                } else {
                    indent
                };
                let _ = write!(y, "{prefix}deviceClassName: gpu\n");
                if u.ratio(1, 6)? {
                    let _ = write!(y, "{prefix}allocationMode: All\n");
                } else {
                    let _ = write!(y, "{prefix}count: {}\n", u.int_in_range(1..=8)?);
                }
                if u.ratio(1, 2)? {
                    let selector = u.choose(&SELECTORS)?;
                    let _ = write!(y, "{prefix}selectors:\n{prefix}- cel: {{expression: '{}'}}\n", selector.replace('\'', "''"));
                }
            }
        }
        if u.ratio(1, 2)? {
            let kind = if u.arbitrary()? { "matchAttribute" } else { "distinctAttribute" };
            let attribute = if u.arbitrary()? { "g" } else { "model" };
            let _ = write!(
                y,
                "    constraints:\n    - {kind}: gpu.example.com/{attribute}\n"
            );
        }
    }
    y.push_str("---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default, uid: u}\nspec:\n  containers:\n  - {name: c, image: i}\n  resourceClaims:\n");
    for c in 0..claims {
        let _ = write!(y, "  - {{name: c{c}, resourceClaimName: claim-{c}}}\n");
    }
    Ok(y)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(text) = cluster(&mut u) else {
        return;
    };
    let mut loader = dra_sim::Loader::new();
    if loader.add_yaml("fuzz.yaml", &text).is_err() {
        return;
    }
    let objects = loader.finish().objects;
    let report = dra_sim::simulate::simulate(objects, dra_sim::FeatureGates::default());
    for pod in &report.pods {
        if pod.outcome != Outcome::Fits {
            continue;
        }
        let mut seen = BTreeSet::new();
        for allocation in pod.allocations.iter().flatten() {
            for result in &allocation.results {
                assert!(
                    seen.insert((result.pool.clone(), result.device.clone())),
                    "device {}/{} allocated twice:\n{text}",
                    result.pool,
                    result.device
                );
            }
        }
    }
});
