//! TEMPORARY compile shim (never committed): stands in for crate::cel until it lands.
#![allow(missing_docs, dead_code)]
use crate::gates::FeatureGates;
use k8s_openapi::api::resource::v1::Device;
use std::sync::Arc;
#[derive(Debug, Clone)]
pub struct CelError(String);
impl std::fmt::Display for CelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
pub struct SelectorCompiler;
impl SelectorCompiler {
    pub fn new(_g: &FeatureGates) -> Self {
        SelectorCompiler
    }
    pub fn compile(&mut self, e: &str) -> Result<Arc<CompiledSelector>, CelError> {
        Ok(Arc::new(CompiledSelector(e.to_string())))
    }
}
pub struct CompiledSelector(String);
impl CompiledSelector {
    pub fn matches(&self, d: &CelDevice) -> Result<bool, CelError> {
        let e = self.0.trim();
        if let Some(rest) = e.strip_prefix("device.driver == \"") {
            return Ok(rest.trim_end_matches('"') == d.0);
        }
        if e == "true" {
            return Ok(true);
        }
        Err(CelError(format!("shim cannot evaluate {e}")))
    }
}
pub struct CelDevice(String);
impl CelDevice {
    pub fn new(driver: &str, _d: &Device, _g: &FeatureGates) -> Self {
        CelDevice(driver.to_string())
    }
}
