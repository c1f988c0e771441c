//! CEL for DRA device selectors: the `device` variable and the Kubernetes
//! library functions, with upstream's error behaviour.
//!
//! CONTRACT (the allocator depends on exactly this surface):
//! - [`SelectorCompiler::new`] builds the environment for a set of feature gates.
//! - [`SelectorCompiler::compile`] compiles one expression, cached per compiler
//!   (one compiler lives for one snapshot).
//! - [`CelDevice::new`] converts a device into the value bound to `device`;
//!   built once per device and reused for every selector.
//! - [`CompiledSelector::matches`] evaluates; any runtime error (missing key,
//!   non-bool result, cost exceeded, bad semver) is an `Err`, never `false`.
