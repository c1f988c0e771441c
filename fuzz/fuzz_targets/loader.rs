//! Any bytes, as YAML and as JSON: the loader returns objects or an error,
//! never panics, and never runs away (its YAML limits scale with the input).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut loader = dra_sim::Loader::new();
    let _ = loader.add_yaml("fuzz.yaml", &text);
    let _ = loader.add_json("fuzz.json", &text);
    let loaded = loader.finish();
    let _ = loaded.skipped_note();
    let _ = loaded.duplicates_note();
});
