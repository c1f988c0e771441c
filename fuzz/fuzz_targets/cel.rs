//! Any text as a device selector: compiling gives a program or an error,
//! evaluating on a few devices gives a verdict or an error; nothing panics,
//! overflows the stack or prints an unbounded message.
#![no_main]

use std::sync::LazyLock;

use dra_sim::FeatureGates;
use dra_sim::cel::{CelDevice, MAX_ERROR_TEXT_BYTES, SelectorCompiler};
use libfuzzer_sys::fuzz_target;

static DEVICES: LazyLock<Vec<CelDevice>> = LazyLock::new(|| {
    let gates = FeatureGates::default();
    let yaml = r#"
- name: gpu-0
  attributes:
    model: {string: A100}
    index: {int: 0}
    healthy: {bool: true}
    driverVersion: {version: 1.2.3}
    kinds: {strings: [a, b]}
  capacity:
    memory: {value: 40Gi}
- name: gpu-1
  allowMultipleAllocations: true
  attributes:
    example.com/numa: {int: -1}
  capacity:
    cores: {value: 500m}
- name: nic-0
"#;
    let devices: Vec<k8s_openapi::api::resource::v1::Device> =
        serde_saphyr::from_str(yaml).expect("the fixed devices parse");
    devices
        .iter()
        .map(|d| CelDevice::new("gpu.example.com", d, &gates))
        .collect()
});

fuzz_target!(|data: &[u8]| {
    let Ok(expression) = std::str::from_utf8(data) else {
        return;
    };
    let mut compiler = SelectorCompiler::new(&FeatureGates::default());
    // The expression is shown escaped: see `MAX_ERROR_TEXT_BYTES`.
    let bound = MAX_ERROR_TEXT_BYTES;
    match compiler.compile(expression) {
        Ok(selector) => {
            for device in DEVICES.iter() {
                if let Err(e) = selector.matches(device) {
                    assert!(e.to_string().len() <= bound, "unbounded runtime error");
                }
            }
        }
        Err(e) => assert!(e.to_string().len() <= bound, "unbounded compile error"),
    }
});
