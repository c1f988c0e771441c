//! Counting that proves a search cannot succeed, run once the search has
//! taken a number of steps (the catalog's `COUNT_AT_STEP`: searches that
//! succeed at once never pay for it).
//!
//! The depth-first search tries combinations of devices, so a request for
//! 32 devices among 31 candidates, 12 one-device claims over 11 devices, or
//! 16 devices with distinct values of an attribute that has 15, explores
//! billions of combinations before it concludes what counting shows at
//! once. kube-scheduler only stops such a search at its filter timeout.
//!
//! [`provably_infeasible`] returns true only when the search would end in
//! "no allocation" — never where it would find one or fail with an error:
//! - it counts devices the search could pick for an exact-count request
//!   (usable pool, not held exclusively, selectable), an upper bound on what
//!   the search can use; a request needing more fails;
//! - the devices of all such requests of the pod's claims together must
//!   number at least the devices they need (skipped when a candidate may be
//!   shared, since one shared device can serve several requests);
//! - a scalar `distinctAttribute` needs as many distinct values among its
//!   requests' candidates as those requests need devices;
//! - anything it cannot bound exactly is left to the search: admin access,
//!   `All` and `firstAvailable` requests count for nothing, list-valued
//!   attributes skip the distinct check;
//! - it gives up wherever the search might end in an error instead (see
//!   [`search_may_fail_with_error`]): a selector error on any device for any
//!   (sub)request, `firstAvailable` alternatives and admin-access requests
//!   included, or an `All` (sub)request in a claim with constraints (a device
//!   the request must take but a constraint rejects is an error). Counting
//!   that ignored them said "unschedulable" where kube-scheduler, searching
//!   on, reached the error (seed 3 clusters 552615, 61305 and others of the
//!   oracle; case 143).

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::DeviceAttribute;

use super::constraints::{Constraint, lookup_attribute};
use super::model::{DevRef, Mode, Slot};
use super::requests::selectable;
use super::search::Search;

/// True when counting proves that no allocation exists for these claims.
pub(crate) fn provably_infeasible(search: &mut Search<'_, '_>) -> bool {
    if search_may_fail_with_error(search) {
        return false;
    }
    let mut needed_total = 0usize;
    let mut union: BTreeSet<u64> = BTreeSet::new();
    let mut shared_candidate = false;
    for claim in 0..search.claims.len() {
        let mut requests: Vec<(usize, Vec<DevRef>)> = Vec::new();
        for request in 0..search.slots[claim].len() {
            let Slot::Exact(data) = &search.slots[claim][request] else {
                continue;
            };
            if data.mode != Mode::ExactCount || data.admin {
                continue;
            }
            let needed = usize::try_from(data.num_devices).unwrap_or(0);
            let Some(candidates) = candidates(search, claim, request) else {
                return false;
            };
            if candidates.len() < needed {
                return true;
            }
            needed_total += needed;
            for dev in &candidates {
                union.insert(dev.key());
                shared_candidate |= device_is_shared(search, *dev);
            }
            requests.push((request, candidates));
        }
        if distinct_values_run_short(search, claim, &requests) {
            return true;
        }
    }
    !shared_candidate && union.len() < needed_total
}

/// Whether the search might stop with an error before it runs out of
/// choices: some (sub)request's selectors fail on some device of a usable
/// pool (whether or not the search would get that far; held devices
/// included, as admin-access requests evaluate them), or an `All`
/// (sub)request belongs to a claim with constraints. Then counting must not
/// cut the search short: its end is the answer.
fn search_may_fail_with_error(search: &mut Search<'_, '_>) -> bool {
    for claim in 0..search.claims.len() {
        let constrained = !search.constraints[claim].is_empty();
        for request in 0..search.slots[claim].len() {
            let n = match &search.slots[claim][request] {
                Slot::Exact(_) => 1,
                Slot::FirstAvailable(subs) => subs.len(),
            };
            for sub in 0..n {
                let data = match &search.slots[claim][request] {
                    Slot::Exact(data) => data,
                    Slot::FirstAvailable(subs) => &subs[sub],
                };
                if constrained && data.mode == Mode::All {
                    return true;
                }
                if selector_fails_somewhere(search, claim, request, sub) {
                    return true;
                }
            }
        }
    }
    false
}

/// A selector of the (sub)request fails on some device of a usable pool.
fn selector_fails_somewhere(
    search: &mut Search<'_, '_>,
    claim: usize,
    request: usize,
    sub: usize,
) -> bool {
    let pools = search.chk.pools;
    let claim_object = search.claims[claim];
    for dev in DevRef::of_usable_pools(pools) {
        let data = match &search.slots[claim][request] {
            Slot::Exact(data) => data,
            Slot::FirstAvailable(subs) => &subs[sub],
        };
        if selectable(&mut search.chk, claim_object, data, dev).is_err() {
            return true;
        }
    }
    false
}

/// The devices the search could pick for an exact request, or `None` when a
/// selector fails on one of them.
fn candidates(search: &mut Search<'_, '_>, claim: usize, request: usize) -> Option<Vec<DevRef>> {
    let pools = search.chk.pools;
    let claim_object = search.claims[claim];
    let mut out = Vec::new();
    for dev in DevRef::of_usable_pools(pools) {
        if search.states[dev.pool].exclusive[dev.flat] {
            continue;
        }
        let Slot::Exact(data) = &search.slots[claim][request] else {
            return None;
        };
        match selectable(&mut search.chk, claim_object, data, dev) {
            Ok(true) => out.push(dev),
            Ok(false) => {}
            Err(_) => return None,
        }
    }
    Some(out)
}

fn device_is_shared(search: &Search<'_, '_>, dev: DevRef) -> bool {
    let pool = &search.chk.pools[dev.pool];
    search.chk.f.consumable_capacity && pool.slices[dev.slice].devices[dev.device].allow_multi
}

/// A scalar `distinctAttribute` whose requests need more devices than there
/// are distinct values among their candidates.
fn distinct_values_run_short(
    search: &Search<'_, '_>,
    claim: usize,
    requests: &[(usize, Vec<DevRef>)],
) -> bool {
    for constraint in &search.constraints[claim] {
        let Constraint::Distinct {
            attribute,
            list_mode: false,
            ..
        } = constraint
        else {
            continue;
        };
        let mut needed = 0usize;
        let mut values: BTreeSet<String> = BTreeSet::new();
        for (request, candidates) in requests {
            let Slot::Exact(data) = &search.slots[claim][*request] else {
                continue;
            };
            if !constraint.applies(data.base_name(), data.sub_name()) {
                continue;
            }
            needed += usize::try_from(data.num_devices).unwrap_or(0);
            for dev in candidates {
                if let Some(value) = attribute_value(search, *dev, attribute) {
                    values.insert(value);
                }
            }
        }
        if values.len() < needed {
            return true;
        }
    }
    false
}

/// The device's scalar attribute as a comparable key (type and value);
/// `None` when the device lacks it (the constraint would refuse it).
fn attribute_value(search: &Search<'_, '_>, dev: DevRef, attribute: &str) -> Option<String> {
    let pool = &search.chk.pools[dev.pool];
    let slice = &pool.slices[dev.slice];
    let device = &slice.devices[dev.device];
    let attr: &DeviceAttribute =
        lookup_attribute(device.raw.attributes.as_ref(), &slice.driver, attribute)?;
    Some(format!(
        "{:?}|{:?}|{:?}|{:?}",
        attr.int, attr.bool, attr.string, attr.version
    ))
}
