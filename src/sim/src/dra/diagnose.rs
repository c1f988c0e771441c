//! Why a node cannot take the pod's claims, in sentences an operator can act
//! on. Upstream only says "cannot allocate all claims"; we count, per
//! request, how many devices survive each eligibility step against the
//! cluster's existing allocations, and name the first step that leaves too
//! few. This runs only after the search failed and never changes its outcome
//! (selector errors here count as "no match").

use super::capacity;
use super::claim_ref;
use super::device_taints::taint_prevents;
use super::inventory::DeviceEntry;
use super::model::{DevRef, Mode, RequestData, Slot};
use super::quantity::{Format, Value};
use super::requests::{OPTIONAL_NODE_OPERATIONS, node_declares, selectable};
use super::search::{RKey, Search};
use crate::reason::Words;

const PREFIX: &str = "cannot allocate all claims: ";

/// Counts of candidate devices after each step.
#[derive(Debug, Default)]
struct Funnel {
    matched: usize,
    free: usize,
    untainted: usize,
    counters: usize,
    capacity: usize,
    /// The first few matching devices that are taken (all of them are counted in
    /// `matched - free`), named so a reader does not take one example for the only one.
    allocated: Vec<String>,
    /// An example device dropped at each later step, with the reason.
    taint_example: Option<String>,
    counter_example: Option<String>,
    capacity_example: Option<String>,
}

/// The reasons for a failed search, each prefixed like upstream's status.
pub(crate) fn diagnose(search: &mut Search<'_, '_>) -> Vec<Words> {
    let mut reasons = Vec::new();
    let node = search.chk.node.metadata.name.clone().unwrap_or_default();
    let unusable: Vec<String> = search
        .chk
        .pools
        .iter()
        .filter(|p| p.incomplete)
        .map(|p| format!("resource pool {} is incomplete (being updated)", p.id()))
        .collect();
    for claim_idx in 0..search.claims.len() {
        let claim = claim_ref(search.claims[claim_idx]);
        let mut blocked = false;
        for request_idx in 0..search.slots[claim_idx].len() {
            let n_subs = match &search.slots[claim_idx][request_idx] {
                Slot::Exact(_) => 1,
                Slot::FirstAvailable(subs) => subs.len(),
            };
            let mut why = Vec::new();
            for sub in 0..n_subs {
                let key = RKey {
                    claim: claim_idx,
                    request: request_idx,
                    sub,
                };
                match request_blocker(search, key) {
                    Some(reason) => why.push(reason),
                    None => break,
                }
            }
            if why.len() == n_subs {
                blocked = true;
                let request = match &search.slots[claim_idx][request_idx] {
                    Slot::Exact(d) => d.name.to_string(),
                    Slot::FirstAvailable(subs) => subs
                        .first()
                        .and_then(|d| d.parent)
                        .unwrap_or("")
                        .to_string(),
                };
                let detail = if n_subs == 1 {
                    why.join("")
                } else {
                    format!("no alternative of firstAvailable fits: {}", why.join("; "))
                };
                reasons.push(Words::text(format!(
                    "{PREFIX}claim {claim} request {request}: {detail}"
                )));
            }
        }
        if !blocked {
            let constraints: Vec<String> = search.constraints[claim_idx]
                .iter()
                .map(|c| {
                    let kind = match c {
                        super::constraints::Constraint::Match { .. } => "matchAttribute",
                        super::constraints::Constraint::Distinct { .. } => "distinctAttribute",
                    };
                    format!("{kind} {}", c.attribute())
                })
                .collect();
            if !constraints.is_empty() && search.results.iter().all(Vec::is_empty) {
                reasons.push(Words::text(format!(
                    "{PREFIX}claim {claim}: constraint {} cannot be satisfied by the free devices",
                    constraints.join(", ")
                )));
            }
        }
    }
    if reasons.is_empty() {
        reasons.push(Words::text(format!(
            "{PREFIX}each request has enough free devices on its own, but not all requests of the pod's claims \
             can be satisfied together (they compete for the same devices or counters, or a constraint fails)"
        )));
    }
    if search.chk.f.optional_node_operations
        && !node_declares(search.chk.node, OPTIONAL_NODE_OPERATIONS)
    {
        let skipping: Vec<&str> = search
            .chk
            .pools
            .iter()
            .flat_map(|p| &p.slices)
            .filter(|s| !s.skip_node_operations.is_empty())
            .map(|s| s.name.as_str())
            .collect();
        if !skipping.is_empty() {
            reasons.push(Words::text(PREFIX).node(node.clone()).then(format!(
                " does not declare the {OPTIONAL_NODE_OPERATIONS} feature, so the devices of \
                 slices that skip node operations ({}) cannot be used there",
                skipping.join(", ")
            )));
        }
    }
    if search.chk.pools.is_empty() {
        reasons.push(
            Words::text(PREFIX)
                .node(node)
                .then(" has no resource pools"),
        );
    }
    for u in unusable {
        reasons.push(Words::text(format!("{PREFIX}{u}")));
    }
    reasons
}

/// `None` when the (sub)request on its own has enough eligible devices.
fn request_blocker(search: &mut Search<'_, '_>, key: RKey) -> Option<String> {
    let data: &RequestData<'_> = search.request_of(key);
    let needed = data.num_devices;
    let mode = data.mode;
    let class = data.class_name.to_string();
    let all_devices = data.all_devices.clone();
    let name = data.full_name();
    if mode == Mode::All {
        if all_devices.is_empty() {
            return Some(format!(
                "allocationMode All needs at least one device of class {class}, but none matches"
            ));
        }
        for dev in all_devices {
            if let Some(reason) = device_blocker(search, key, dev) {
                return Some(format!(
                    "allocationMode All needs every matching device, but {reason}"
                ));
            }
        }
        return None;
    }
    if needed <= 0 {
        return None;
    }
    let funnel = funnel(search, key);
    let needed = usize::try_from(needed).unwrap_or(usize::MAX);
    let prefix = if search.request_of(key).parent.is_some() {
        format!("{name}: ")
    } else {
        String::new()
    };
    let dev = |n: usize| if n == 1 { "device" } else { "devices" };
    if funnel.matched < needed {
        return Some(format!(
            "{prefix}{} {} of class {class} match the selectors, {needed} needed",
            funnel.matched,
            dev(funnel.matched)
        ));
    }
    if funnel.free < needed {
        let example = allocated_note(&funnel.allocated, funnel.matched - funnel.free);
        return Some(format!(
            "{prefix}{} {} match but only {} {} free, {needed} needed{example}",
            funnel.matched,
            dev(funnel.matched),
            funnel.free,
            if funnel.free == 1 { "is" } else { "are" }
        ));
    }
    if funnel.untainted < needed {
        let example = funnel.taint_example.unwrap_or_default();
        return Some(format!(
            "{prefix}{} free {} left after taints, {needed} needed: {example}",
            funnel.untainted,
            dev(funnel.untainted)
        ));
    }
    if funnel.counters < needed {
        let example = funnel.counter_example.unwrap_or_default();
        return Some(format!(
            "{prefix}{} {} left after shared counters, {needed} needed: {example}",
            funnel.counters,
            dev(funnel.counters)
        ));
    }
    if funnel.capacity < needed {
        let example = funnel.capacity_example.unwrap_or_default();
        return Some(format!(
            "{prefix}{} {} with enough capacity, {needed} needed: {example}",
            funnel.capacity,
            dev(funnel.capacity)
        ));
    }
    None
}

/// How many taken devices a "only N free" reason names.
const NAMED_ALLOCATED: usize = 3;

/// ` (devices a, b and c are allocated)`, ` (devices a, b, c and 5 more are allocated)`:
/// the first `named` of the `taken` matching devices that are allocated.
fn allocated_note(named: &[String], taken: usize) -> String {
    let more = taken.saturating_sub(named.len());
    match (named, more) {
        ([], _) => String::new(),
        ([one], 0) => format!(" (device {one} is allocated)"),
        ([first @ .., last], 0) => {
            format!(" (devices {} and {last} are allocated)", first.join(", "))
        }
        (all, more) => format!(
            " (devices {} and {more} more are allocated)",
            all.join(", ")
        ),
    }
}

fn funnel(search: &mut Search<'_, '_>, key: RKey) -> Funnel {
    let mut funnel = Funnel::default();
    let pools = search.chk.pools;
    for dev in DevRef::of_usable_pools(pools) {
        if !matches_selectors(search, key, dev) {
            continue;
        }
        funnel.matched += 1;
        let device = &pools[dev.pool].slices[dev.slice].devices[dev.device];
        let data = search.request_of(key);
        if !data.admin && search.states[dev.pool].exclusive[dev.flat] {
            if funnel.allocated.len() < NAMED_ALLOCATED {
                funnel.allocated.push(device.name.clone());
            }
            continue;
        }
        funnel.free += 1;
        if let Some(reason) = taint_reason(search, key, device) {
            funnel.taint_example.get_or_insert(reason);
            continue;
        }
        funnel.untainted += 1;
        if let Some(reason) = counter_reason(search, key, dev) {
            funnel.counter_example.get_or_insert(reason);
            continue;
        }
        funnel.counters += 1;
        if let Some(reason) = capacity_reason(search, key, dev) {
            funnel.capacity_example.get_or_insert(reason);
            continue;
        }
        funnel.capacity += 1;
    }
    funnel
}

fn matches_selectors(search: &mut Search<'_, '_>, key: RKey, dev: DevRef) -> bool {
    let claim = search.claims[key.claim];
    let data = match &search.slots[key.claim][key.request] {
        Slot::Exact(d) => d,
        Slot::FirstAvailable(subs) => &subs[key.sub],
    };
    let ok = selectable(&mut search.chk, claim, data, dev).unwrap_or(false);
    ok && (!search.chk.f.consumable_capacity
        || capacity::fits(
            data.capacity.as_deref(),
            device_of(search, dev),
            None,
            None,
            search.chk.f.fractional_capacity_range,
        )
        .is_ok_and(|fit| fit.is_some()))
}

fn device_of<'s>(search: &'s Search<'_, '_>, dev: DevRef) -> &'s DeviceEntry {
    &search.chk.pools[dev.pool].slices[dev.slice].devices[dev.device]
}

/// Why one fixed device of an `All` request cannot be taken.
fn device_blocker(search: &mut Search<'_, '_>, key: RKey, dev: DevRef) -> Option<String> {
    let device = device_of(search, dev);
    let data = search.request_of(key);
    if !data.admin && search.states[dev.pool].exclusive[dev.flat] {
        return Some(format!("device {} is allocated", device.name));
    }
    if let Some(reason) = taint_reason(search, key, device) {
        return Some(reason);
    }
    if let Some(reason) = counter_reason(search, key, dev) {
        return Some(reason);
    }
    capacity_reason(search, key, dev)
}

fn taint_reason(search: &Search<'_, '_>, key: RKey, device: &DeviceEntry) -> Option<String> {
    if !search.chk.f.device_taints {
        return None;
    }
    let tolerations = search.request_of(key).tolerations;
    if !taint_prevents(&device.taints, tolerations) {
        return None;
    }
    let taint = device.taints.iter().find(|t| {
        (t.effect == "NoSchedule" || t.effect == "NoExecute")
            && taint_prevents(std::slice::from_ref(*t), tolerations)
    })?;
    Some(format!(
        "device {} is tainted {}={}:{} and the request does not tolerate it",
        device.name, taint.key, taint.value, taint.effect
    ))
}

fn counter_reason(search: &Search<'_, '_>, key: RKey, dev: DevRef) -> Option<String> {
    let f = search.chk.f;
    let pool = &search.chk.pools[dev.pool];
    let device = device_of(search, dev);
    if device.consumes.is_empty() {
        return None;
    }
    if !f.partitionable_devices {
        return Some(format!(
            "device {} consumes shared counters, which need the DRAPartitionableDevices feature",
            device.name
        ));
    }
    let state = &search.states[dev.pool];
    if f.consumable_capacity && device.allow_multi && state.shared[dev.flat] {
        // Later shares ride on the first share's counters.
        return None;
    }
    let _ = key;
    if search.skip_for_compatibility_groups(dev) {
        return Some(format!(
            "device {} declares compatibility groups, or draws from a counter set whose allocated devices \
             declare some, which needs the DRADeviceCompatibilityGroups feature",
            device.name
        ));
    }
    if f.compatibility_groups {
        for (c, &set) in device.consumes.iter().zip(&pool.consumed_sets[dev.flat]) {
            if !state.group_baseline[set].admits(&c.groups) {
                return Some(format!(
                    "device {}: its compatibility groups on counter set {} are incompatible with those of the \
                     devices allocated from it",
                    device.name, c.counter_set
                ));
            }
        }
    }
    for (set_idx, set) in pool.counter_sets.iter().enumerate() {
        for (counter_idx, (counter, _)) in set.counters.iter().enumerate() {
            let flat = pool.counter_index(set_idx, counter_idx);
            let own = pool.consumption[dev.flat]
                .iter()
                .filter(|(c, _)| *c == flat)
                .fold(super::quantity::Amount::ZERO, |acc, (_, a)| acc.plus(*a));
            let left = state.available[flat];
            if left < own {
                let show = |a| {
                    Value {
                        amount: a,
                        format: Format::BinarySi,
                    }
                    .canonical()
                };
                return Some(format!(
                    "device {}: counter set {} counter {counter} exhausted ({} left, {} needed)",
                    device.name,
                    set.name,
                    show(left),
                    show(own)
                ));
            }
        }
    }
    None
}

fn capacity_reason(search: &Search<'_, '_>, key: RKey, dev: DevRef) -> Option<String> {
    if !search.chk.f.consumable_capacity {
        return None;
    }
    let data = search.request_of(key);
    let device = device_of(search, dev);
    let consumed = search.states[dev.pool].consumed[dev.flat].as_deref();
    let fractional = search.chk.f.fractional_capacity_range;
    match capacity::fits(data.capacity.as_deref(), device, consumed, None, fractional) {
        Ok(Some(true)) => None,
        _ => Some(format!(
            "device {} has not enough free capacity for the request (or the request violates its request policy)",
            device.name
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::allocated_note;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn every_taken_device_is_named_or_counted() {
        assert_eq!(allocated_note(&[], 0), "");
        assert_eq!(
            allocated_note(&names(&["gpu-0"]), 1),
            " (device gpu-0 is allocated)"
        );
        assert_eq!(
            allocated_note(&names(&["gpu-0", "gpu-1"]), 2),
            " (devices gpu-0 and gpu-1 are allocated)"
        );
        assert_eq!(
            allocated_note(&names(&["gpu-0", "gpu-1", "gpu-2"]), 3),
            " (devices gpu-0, gpu-1 and gpu-2 are allocated)"
        );
        assert_eq!(
            allocated_note(&names(&["gpu-0", "gpu-1", "gpu-2"]), 8),
            " (devices gpu-0, gpu-1, gpu-2 and 5 more are allocated)"
        );
        assert_eq!(
            allocated_note(&names(&["gpu-0"]), 2),
            " (devices gpu-0 and 1 more are allocated)"
        );
    }
}
