//! What a pod asks for and what a node offers, as integers.
//!
//! Upstream computes a pod's requests with `resource.PodRequests`
//! (component-helpers): regular containers are summed; each init container
//! runs alone, next to the restartable (sidecar) init containers started
//! before it, so the pod needs the larger of the two phases; pod-level
//! requests (cpu, memory, hugepages) replace the container sums; pod overhead
//! is added last. That arithmetic is done here on exact nano-units and only
//! then rounded up the way `Quantity.Value()`/`MilliValue()` round, so that
//! `0.5 + 0.5` is 1, not 2.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::quantity::{QuantityError, nano_value};

/// Nano-units per unit.
const NANO: i128 = 1_000_000_000;
/// Nano-units per milli-unit.
const NANO_PER_MILLI: i128 = 1_000_000;

/// Prefix of the implicit extended resource of a DeviceClass (KEP-5004).
pub(crate) const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// `v1helper.IsPrefixedNativeResource`.
pub(crate) fn is_prefixed_native(name: &str) -> bool {
    name.contains("kubernetes.io/")
}

/// `v1helper.IsExtendedResourceName`: outside the `kubernetes.io` domain,
/// namespaced by a slash, and not a quota `requests.` name.
pub(crate) fn is_extended(name: &str) -> bool {
    let native = !name.contains('/') || is_prefixed_native(name);
    !native && !name.starts_with("requests.")
}

/// `schedutil.IsScalarResourceName`: the names NodeResourcesFit tracks beyond
/// cpu, memory and ephemeral storage. Anything else is ignored upstream.
pub(crate) fn is_scalar(name: &str) -> bool {
    is_extended(name)
        || name.starts_with("hugepages-")
        || is_prefixed_native(name)
        || name.starts_with("attachable-volumes-")
}

/// `schedutil.IsDRAExtendedResourceName`.
pub(crate) fn is_dra_extended(name: &str) -> bool {
    is_extended(name) || name.starts_with(DEVICE_CLASS_PREFIX)
}

/// Resources supported at pod level (`resource.IsSupportedPodLevelResource`).
fn is_pod_level_supported(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// An exact resource list: name → nano-units.
pub(crate) type NanoList = BTreeMap<String, i128>;

fn parse_list(
    list: Option<&BTreeMap<String, Quantity>>,
    strict: bool,
) -> Result<NanoList, QuantityError> {
    let mut out = NanoList::new();
    for (name, quantity) in list.into_iter().flatten() {
        match nano_value(&quantity.0) {
            Ok(v) => {
                out.insert(name.clone(), v);
            }
            // Objects already in the cluster passed API validation; a bad
            // quantity there is a damaged snapshot, counted as zero.
            Err(e) if strict => return Err(e),
            Err(_) => {}
        }
    }
    Ok(out)
}

fn add_into(target: &mut NanoList, other: &NanoList) {
    for (name, v) in other {
        let slot = target.entry(name.clone()).or_insert(0);
        *slot = slot.saturating_add(*v);
    }
}

fn max_into(target: &mut NanoList, other: &NanoList) {
    for (name, v) in other {
        let slot = target.entry(name.clone()).or_insert(0);
        *slot = (*slot).max(*v);
    }
}

fn container_requests(container: &Container, strict: bool) -> Result<NanoList, QuantityError> {
    parse_list(
        container
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref()),
        strict,
    )
}

/// `resource.PodRequests(pod, {})` with pod-level resources enabled (beta and
/// on by default from 1.34, the oldest release modelled).
///
/// # Errors
/// A request that is not a quantity, when `strict` (pending pods); bound pods
/// count a bad quantity as zero.
pub(crate) fn pod_requests(pod: &Pod, strict: bool) -> Result<NanoList, QuantityError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(NanoList::new());
    };
    let mut total = NanoList::new();
    for container in &spec.containers {
        add_into(&mut total, &container_requests(container, strict)?);
    }
    let mut sidecars = NanoList::new();
    let mut init_peak = NanoList::new();
    for container in spec.init_containers.iter().flatten() {
        let own = container_requests(container, strict)?;
        let phase = if container.restart_policy.as_deref() == Some("Always") {
            // A sidecar keeps running next to the regular containers.
            add_into(&mut total, &own);
            add_into(&mut sidecars, &own);
            sidecars.clone()
        } else {
            let mut phase = own;
            add_into(&mut phase, &sidecars);
            phase
        };
        max_into(&mut init_peak, &phase);
    }
    max_into(&mut total, &init_peak);
    let pod_level = parse_list(
        spec.resources.as_ref().and_then(|r| r.requests.as_ref()),
        strict,
    )?;
    if pod_level.keys().any(|k| is_pod_level_supported(k)) {
        for (name, v) in pod_level {
            if is_pod_level_supported(&name) {
                total.insert(name, v);
            }
        }
    }
    add_into(&mut total, &parse_list(spec.overhead.as_ref(), strict)?);
    Ok(total)
}

/// `Quantity.Value()`: whole units, rounded up, saturating.
pub(crate) fn units(nanos: i128) -> i64 {
    round_up(nanos, NANO)
}

/// `Quantity.MilliValue()`: milli-units, rounded up, saturating.
pub(crate) fn millis(nanos: i128) -> i64 {
    round_up(nanos, NANO_PER_MILLI)
}

/// `Quantity.AsInt64()`: the value when it is a whole number that fits.
pub(crate) fn exact_units(nanos: i128) -> Option<i64> {
    if nanos % NANO == 0 {
        i64::try_from(nanos / NANO).ok()
    } else {
        None
    }
}

fn round_up(nanos: i128, unit: i128) -> i64 {
    let v = if nanos >= 0 {
        (nanos + unit - 1) / unit
    } else {
        nanos / unit
    };
    i64::try_from(v).unwrap_or(if v > 0 { i64::MAX } else { i64::MIN })
}

/// Interned names of scalar resources, so per-node vectors are indexed by
/// a small integer instead of hashed by name in the hot loop.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResourceTable {
    ids: HashMap<String, u32>,
}

impl ResourceTable {
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = u32::try_from(self.ids.len()).unwrap_or(u32::MAX);
        self.ids.insert(name.to_string(), id);
        id
    }

    pub(crate) fn get(&self, name: &str) -> Option<u32> {
        self.ids.get(name).copied()
    }

    /// The interned names, by id.
    pub(crate) fn names(&self) -> Vec<&str> {
        let mut names = vec![""; self.ids.len()];
        for (name, id) in &self.ids {
            if let Some(slot) = names.get_mut(*id as usize) {
                *slot = name;
            }
        }
        names
    }
}

/// cpu, memory, ephemeral storage and scalars of one node or pod, as
/// framework.Resource holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ResourceVec {
    pub(crate) milli_cpu: i64,
    pub(crate) memory: i64,
    pub(crate) ephemeral_storage: i64,
    /// Indexed by [`ResourceTable`] id; missing entries are zero.
    pub(crate) scalars: Vec<i64>,
}

impl ResourceVec {
    /// A scalar by id, zero when absent.
    pub(crate) fn scalar(&self, id: u32) -> i64 {
        self.scalars.get(id as usize).copied().unwrap_or(0)
    }

    fn scalar_mut(&mut self, id: u32) -> &mut i64 {
        let index = id as usize;
        if self.scalars.len() <= index {
            self.scalars.resize(index + 1, 0);
        }
        &mut self.scalars[index]
    }

    /// `framework.Resource.Add` of a resource list, interning scalar names.
    /// Returns the `pods` entry, which a node's allocatable carries.
    pub(crate) fn add_list(&mut self, list: &NanoList, table: &mut ResourceTable) -> i64 {
        let mut pods = 0i64;
        for (name, nanos) in list {
            pods = pods.saturating_add(self.add_named(name, *nanos, table));
        }
        pods
    }

    /// [`ResourceVec::add_list`] of a node's allocatable as [`node_allocatable`] parses it,
    /// without making that owned list: every node of the cluster is read so each time a
    /// snapshot is indexed. The map is in name order, as the parsed list is.
    pub(crate) fn add_node_allocatable(&mut self, node: &Node, table: &mut ResourceTable) -> i64 {
        let list = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
        let mut pods = 0i64;
        for (name, quantity) in list.into_iter().flatten() {
            // Leniently, as `parse_list`: a damaged entry is left out.
            if let Ok(nanos) = nano_value(&quantity.0) {
                pods = pods.saturating_add(self.add_named(name, nanos, table));
            }
        }
        pods
    }

    /// Adds one entry of a resource list; returns what it adds to `pods`.
    fn add_named(&mut self, name: &str, nanos: i128, table: &mut ResourceTable) -> i64 {
        match name {
            "cpu" => self.milli_cpu = self.milli_cpu.saturating_add(millis(nanos)),
            "memory" => self.memory = self.memory.saturating_add(units(nanos)),
            "ephemeral-storage" => {
                self.ephemeral_storage = self.ephemeral_storage.saturating_add(units(nanos));
            }
            "pods" => return units(nanos),
            other if is_scalar(other) => {
                let slot = self.scalar_mut(table.intern(other));
                *slot = slot.saturating_add(units(nanos));
            }
            _ => {}
        }
        0
    }
}

/// What a bound pod adds to its node's requested total: [`pod_requests`] (a bad quantity
/// counts as zero) added to an empty vector, the same result to the last bit.
///
/// Every loop of the controller counts every bound pod of the cluster (100,000 at the
/// scale of issue #28), and nearly all of them have regular containers only: those are
/// summed here on borrowed names, where the general path builds owned name → amount maps
/// for each container and the pod. Names are added in name order, as the general path's
/// sorted map adds them, so scalar names are interned in the same order.
pub(crate) fn bound_pod_vec(pod: &Pod, table: &mut ResourceTable) -> ResourceVec {
    let mut vec = ResourceVec::default();
    let Some(spec) = pod.spec.as_ref() else {
        return vec;
    };
    let plain = spec.init_containers.as_ref().is_none_or(Vec::is_empty)
        && spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .is_none_or(BTreeMap::is_empty)
        && spec.overhead.as_ref().is_none_or(BTreeMap::is_empty);
    if !plain {
        vec.add_list(&pod_requests(pod, false).unwrap_or_default(), table);
        return vec;
    }
    let requests = spec
        .containers
        .iter()
        .filter_map(|c| c.resources.as_ref().and_then(|r| r.requests.as_ref()));
    let mut sums: Vec<(&str, i128)> = Vec::new();
    for list in requests {
        for (name, quantity) in list {
            // As `parse_list` leniently: a damaged entry is left out.
            let Ok(nanos) = nano_value(&quantity.0) else {
                continue;
            };
            match sums.iter_mut().find(|(n, _)| *n == name.as_str()) {
                Some((_, sum)) => *sum = sum.saturating_add(nanos),
                None => sums.push((name, nanos)),
            }
        }
    }
    sums.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (name, nanos) in sums {
        vec.add_named(name, nanos, table);
    }
    vec
}

/// A node's `status.allocatable`, parsed leniently (a damaged entry is zero).
pub(crate) fn node_allocatable(node: &Node) -> NanoList {
    allocatable_list(node.status.as_ref().and_then(|s| s.allocatable.as_ref()))
}

/// An allocatable resource list, parsed as a node's is.
pub(crate) fn allocatable_list(list: Option<&BTreeMap<String, Quantity>>) -> NanoList {
    parse_list(list, false).unwrap_or_default()
}

impl ResourceVec {
    /// Adds another vector (a pod's requests to its node's total).
    pub(crate) fn add(&mut self, other: &Self) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        if self.scalars.len() < other.scalars.len() {
            self.scalars.resize(other.scalars.len(), 0);
        }
        for (mine, theirs) in self.scalars.iter_mut().zip(&other.scalars) {
            *mine = mine.saturating_add(*theirs);
        }
    }

    /// Whether an amount is at a bound of i64, where [`ResourceVec::add`] saturates: taking
    /// away what was added then no longer gives the sum of what is left.
    pub(crate) fn saturated(&self) -> bool {
        [self.milli_cpu, self.memory, self.ephemeral_storage]
            .iter()
            .chain(&self.scalars)
            .any(|v| *v == i64::MAX || *v == i64::MIN)
    }

    /// Takes away what [`ResourceVec::add`] added.
    pub(crate) fn sub(&mut self, other: &Self) {
        self.milli_cpu = self.milli_cpu.saturating_sub(other.milli_cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_sub(other.ephemeral_storage);
        for (mine, theirs) in self.scalars.iter_mut().zip(&other.scalars) {
            *mine = mine.saturating_sub(*theirs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, ResourceRequirements};

    fn container(requests: &[(&str, &str)], sidecar: bool) -> Container {
        Container {
            name: "c".into(),
            resources: Some(ResourceRequirements {
                requests: Some(
                    requests
                        .iter()
                        .map(|(k, v)| ((*k).to_string(), Quantity((*v).to_string())))
                        .collect(),
                ),
                ..Default::default()
            }),
            restart_policy: sidecar.then(|| "Always".to_string()),
            ..Default::default()
        }
    }

    fn pod(containers: Vec<Container>, init: Vec<Container>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                containers,
                init_containers: Some(init),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    // The example in the comment of upstream's computePodResourceRequest.
    #[test]
    fn init_containers_take_the_max_regular_ones_the_sum() {
        let p = pod(
            vec![
                container(&[("cpu", "2"), ("memory", "1G")], false),
                container(&[("cpu", "1"), ("memory", "1G")], false),
            ],
            vec![
                container(&[("cpu", "2"), ("memory", "1G")], false),
                container(&[("cpu", "2"), ("memory", "3G")], false),
            ],
        );
        let r = pod_requests(&p, true).unwrap();
        assert_eq!(millis(r["cpu"]), 3000);
        assert_eq!(units(r["memory"]), 3_000_000_000);
    }

    // KEP-753's example: sidecars add to the regular containers and to every
    // later init container.
    #[test]
    fn sidecars_add_to_everything_after_them() {
        let p = pod(
            vec![container(&[("cpu", "1")], false)],
            vec![
                container(&[("cpu", "1")], true),
                container(&[("cpu", "3")], false),
            ],
        );
        let r = pod_requests(&p, true).unwrap();
        // max(regular 1 + sidecar 1, init 3 + sidecar 1) = 4
        assert_eq!(millis(r["cpu"]), 4000);
    }

    #[test]
    fn fractions_are_summed_before_rounding() {
        let p = pod(
            vec![
                container(&[("memory", "0.5")], false),
                container(&[("memory", "0.5")], false),
            ],
            vec![],
        );
        assert_eq!(units(pod_requests(&p, true).unwrap()["memory"]), 1);
    }

    /// The fast path for bound pods gives the general path's vector, scalar ids
    /// included, for pods it takes (plain containers, sums of fractions, scalars, damaged
    /// entries) and pods it leaves to the general path (init containers, sidecars,
    /// pod-level requests, overhead).
    #[test]
    fn bound_pod_vectors_are_the_general_paths() {
        let plain = |containers: Vec<Container>| pod(containers, vec![]);
        let with_spec = |edit: fn(&mut PodSpec)| {
            let mut p = plain(vec![container(&[("cpu", "1"), ("memory", "1Gi")], false)]);
            if let Some(spec) = p.spec.as_mut() {
                edit(spec);
            }
            p
        };
        let pods = [
            Pod::default(),
            plain(vec![]),
            plain(vec![container(&[("cpu", "3"), ("memory", "12Gi")], false)]),
            plain(vec![
                container(&[("memory", "0.5"), ("nvidia.com/gpu", "1")], false),
                container(&[("memory", "0.5"), ("example.com/nic", "2")], false),
                container(&[("hugepages-2Mi", "1Gi"), ("cpu", "250m")], false),
            ]),
            plain(vec![
                container(&[("cpu", "not-a-quantity"), ("memory", "1Gi")], false),
                container(&[("cpu", "500m"), ("foo", "3")], false),
            ]),
            pod(
                vec![container(&[("cpu", "1")], false)],
                vec![
                    container(&[("cpu", "1")], true),
                    container(&[("cpu", "3"), ("zeta.io/x", "1")], false),
                ],
            ),
            with_spec(|s| {
                s.resources = Some(ResourceRequirements {
                    requests: Some([("cpu".to_string(), Quantity("4".into()))].into()),
                    ..Default::default()
                });
            }),
            with_spec(|s| {
                s.overhead = Some([("memory".to_string(), Quantity("100Mi".into()))].into());
            }),
        ];
        let (mut fast_table, mut general_table) =
            (ResourceTable::default(), ResourceTable::default());
        for (i, p) in pods.iter().enumerate() {
            let fast = bound_pod_vec(p, &mut fast_table);
            let mut general = ResourceVec::default();
            general.add_list(
                &pod_requests(p, false).unwrap_or_default(),
                &mut general_table,
            );
            assert_eq!(fast, general, "pod {i}");
        }
        assert_eq!(fast_table.ids, general_table.ids);
        // Rounded after summing: 0.5 + 0.5 bytes is one byte, as upstream counts it.
        assert_eq!(bound_pod_vec(&pods[3], &mut fast_table).memory, 1);
    }

    /// A node's allocatable read in place is the parsed list added, damaged entries and
    /// scalars included.
    #[test]
    fn node_allocatable_in_place_is_the_parsed_lists() {
        let node = Node {
            status: Some(k8s_openapi::api::core::v1::NodeStatus {
                allocatable: Some(
                    [
                        ("cpu", "31500m"),
                        ("memory", "125Gi"),
                        ("pods", "110"),
                        ("nvidia.com/gpu", "8"),
                        ("hugepages-1Gi", "bad"),
                        ("ephemeral-storage", "0.5"),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (mut in_place_table, mut parsed_table) =
            (ResourceTable::default(), ResourceTable::default());
        let (mut in_place, mut parsed) = (ResourceVec::default(), ResourceVec::default());
        let pods = in_place.add_node_allocatable(&node, &mut in_place_table);
        assert_eq!(
            pods,
            parsed.add_list(&node_allocatable(&node), &mut parsed_table)
        );
        assert_eq!(pods, 110);
        assert_eq!(in_place, parsed);
        assert_eq!(in_place.milli_cpu, 31_500);
        assert_eq!(in_place_table.ids, parsed_table.ids);
        assert_eq!(
            in_place.add_node_allocatable(&Node::default(), &mut in_place_table),
            0
        );
    }

    #[test]
    fn resource_name_classes_follow_v1helper() {
        assert!(is_extended("nvidia.com/gpu"));
        assert!(!is_extended("cpu"));
        assert!(!is_extended("kubernetes.io/foo"));
        assert!(!is_extended("requests.nvidia.com/gpu"));
        assert!(is_scalar("hugepages-2Mi"));
        assert!(is_scalar("attachable-volumes-aws-ebs"));
        assert!(is_scalar("deviceclass.resource.kubernetes.io/gpu"));
        assert!(!is_scalar("foo"));
        assert!(is_dra_extended("deviceclass.resource.kubernetes.io/gpu"));
        assert!(!is_dra_extended("hugepages-2Mi"));
    }

    #[test]
    fn exact_units_only_for_whole_numbers() {
        assert_eq!(exact_units(2 * NANO), Some(2));
        assert_eq!(exact_units(NANO / 2), None);
    }
}
