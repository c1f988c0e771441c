//! The types one `allocate` call shares between its stages (validation,
//! search, results, diagnosis): classes, requests and their slots, device
//! references and the checker's inputs. They live here, below every stage,
//! so that imports point one way: catalog → diagnose/results → search →
//! requests → model.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceToleration};

use super::Features;
use super::cel_cache::{DeviceCaches, SelectorTable};
use super::pool_state::PoolState;
use super::pools::Pool;
use super::quantity::Value;
use crate::gates::FeatureGates;

/// A DeviceClass with its selectors interned.
#[derive(Debug)]
pub(crate) struct ClassEntry {
    pub name: String,
    pub class: DeviceClass,
    /// One per selector; `None` for a selector without `cel`.
    pub selectors: Vec<Option<u32>>,
}

/// Upstream's limit on results per claim (`AllocationResultsMaxSize`).
pub(crate) const MAX_RESULTS: i64 = 32;

/// How many devices a (sub)request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    ExactCount,
    All,
}

/// A device by its position in the node's pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DevRef {
    pub pool: usize,
    pub slice: usize,
    pub device: usize,
    /// The device's number within its pool.
    pub flat: usize,
}

impl DevRef {
    /// Every device of the usable pools (invalid ones are skipped, as the
    /// allocator skips them), in the allocator's order: pool, slice, device.
    pub fn of_usable_pools(pools: &[Pool]) -> impl Iterator<Item = DevRef> + '_ {
        pools
            .iter()
            .enumerate()
            .filter(|(_, pool)| pool.usable())
            .flat_map(|(pool_idx, pool)| {
                pool.slices
                    .iter()
                    .enumerate()
                    .flat_map(move |(slice_idx, slice)| {
                        (0..slice.devices.len()).map(move |device_idx| DevRef {
                            pool: pool_idx,
                            slice: slice_idx,
                            device: device_idx,
                            flat: pool.offsets[slice_idx] + device_idx,
                        })
                    })
            })
    }

    /// A key unique within one call.
    pub fn key(self) -> u64 {
        ((self.pool as u64) << 32) | self.flat as u64
    }
}

/// One request, or one subrequest of a `firstAvailable` list.
#[derive(Debug)]
pub(crate) struct RequestData<'c> {
    pub name: &'c str,
    /// The `firstAvailable` request this subrequest belongs to.
    pub parent: Option<&'c str>,
    pub class: &'c ClassEntry,
    pub class_name: &'c str,
    pub selectors: Vec<u32>,
    pub mode: Mode,
    pub num_devices: i64,
    /// For `All`: the devices, fixed up front.
    pub all_devices: Vec<DevRef>,
    pub admin: bool,
    pub tolerations: &'c [DeviceToleration],
    /// `capacity.requests`, parsed; `None` without a map.
    pub capacity: Option<Vec<(String, Value)>>,
}

impl RequestData<'_> {
    /// `r` or `r/s`, as results name it.
    pub fn full_name(&self) -> String {
        match self.parent {
            Some(parent) => format!("{parent}/{}", self.name),
            None => self.name.to_string(),
        }
    }

    /// The name constraints are keyed by: the parent's for subrequests.
    pub fn base_name(&self) -> &str {
        self.parent.unwrap_or(self.name)
    }

    /// The subrequest's own name, for constraint scopes.
    pub fn sub_name(&self) -> Option<&str> {
        self.parent.map(|_| self.name)
    }
}

/// A request slot of a claim.
#[derive(Debug)]
pub(crate) enum Slot<'c> {
    Exact(RequestData<'c>),
    FirstAvailable(Vec<RequestData<'c>>),
}

/// Shared inputs for validating requests and checking selectors.
pub(crate) struct Checker<'a> {
    pub f: Features,
    pub gates: &'a FeatureGates,
    pub node: &'a Node,
    pub pools: &'a [Pool],
    /// What existing allocations mean for each pool (aligned with `pools`).
    pub states: &'a [PoolState],
    pub table: &'a mut SelectorTable,
    pub caches: &'a mut DeviceCaches,
}
