//! NodeResourcesFit: the pod's requests must fit in the node's allocatable
//! minus what the pods already on it request (`fitsRequest`), plus one pod
//! slot under `allocatable.pods`.
//!
//! With `DRAExtendedResource` on, an extended resource that a DeviceClass
//! maps and that the node does not advertise (allocatable absent or zero) is
//! left to the DRA allocator (`ShouldDelegateResourceToDRA`); one that no
//! class maps and the node lacks is "Insufficient".

use super::requests::{NanoList, ResourceTable, ResourceVec, is_scalar, millis, units};

/// Upstream plugin name.
pub const NAME: &str = "NodeResourcesFit";

/// One scalar (extended, hugepages, …) request of a pod.
#[derive(Debug, Clone)]
pub(crate) struct ScalarRequest {
    pub(crate) name: String,
    /// Interned id when some node or pod had the name at prepare time.
    pub(crate) id: Option<u32>,
    pub(crate) quantity: i64,
    /// A DeviceClass maps this name and the gate is on.
    pub(crate) via_dra: bool,
}

/// What the pod needs from a node, rounded as framework.Resource rounds.
#[derive(Debug, Clone, Default)]
pub(crate) struct PodRequest {
    pub(crate) milli_cpu: i64,
    pub(crate) memory: i64,
    pub(crate) ephemeral_storage: i64,
    /// Sorted by name (upstream iterates a map; the order of reasons is ours).
    pub(crate) scalars: Vec<ScalarRequest>,
}

impl PodRequest {
    /// From `PodRequests`; `via_dra` says which names a DeviceClass serves.
    pub(crate) fn new(
        list: &NanoList,
        table: &ResourceTable,
        via_dra: impl Fn(&str) -> bool,
    ) -> Self {
        let mut request = Self::default();
        for (name, nanos) in list {
            match name.as_str() {
                "cpu" => request.milli_cpu = millis(*nanos),
                "memory" => request.memory = units(*nanos),
                "ephemeral-storage" => request.ephemeral_storage = units(*nanos),
                other if is_scalar(other) => request.scalars.push(ScalarRequest {
                    name: other.to_string(),
                    id: table.get(other),
                    quantity: units(*nanos),
                    via_dra: via_dra(other),
                }),
                _ => {}
            }
        }
        request
    }
}

impl PodRequest {
    /// The same requests as a vector, interning names first seen here.
    pub(crate) fn to_vec(&self, table: &mut ResourceTable) -> ResourceVec {
        let mut vec = ResourceVec {
            milli_cpu: self.milli_cpu,
            memory: self.memory,
            ephemeral_storage: self.ephemeral_storage,
            scalars: Vec::new(),
        };
        for scalar in &self.scalars {
            let id = scalar.id.unwrap_or_else(|| table.intern(&scalar.name)) as usize;
            if vec.scalars.len() <= id {
                vec.scalars.resize(id + 1, 0);
            }
            vec.scalars[id] = vec.scalars[id].saturating_add(scalar.quantity);
        }
        vec
    }
}

/// A node as this filter sees it.
pub(crate) struct NodeResources<'a> {
    pub(crate) allocatable: &'a ResourceVec,
    pub(crate) allowed_pods: i64,
    pub(crate) requested: &'a ResourceVec,
    pub(crate) pod_count: i64,
}

/// Bits of the insufficient-resources mask.
const TOO_MANY_PODS: u64 = 1;
const CPU: u64 = 1 << 1;
const MEMORY: u64 = 1 << 2;
const EPHEMERAL: u64 = 1 << 3;
const FIRST_SCALAR_BIT: usize = 4;

/// Checks the node; `Err` carries a mask of what was insufficient, turned
/// into words only when a caller wants them ([`reason`]).
pub(crate) fn check(
    request: &PodRequest,
    node: &NodeResources<'_>,
    table: &ResourceTable,
) -> Result<(), u64> {
    let mut mask = 0u64;
    if node.pod_count.saturating_add(1) > node.allowed_pods {
        mask |= TOO_MANY_PODS;
    }
    let free = |alloc: i64, used: i64| alloc.saturating_sub(used);
    if request.milli_cpu > 0
        && request.milli_cpu > free(node.allocatable.milli_cpu, node.requested.milli_cpu)
    {
        mask |= CPU;
    }
    if request.memory > 0 && request.memory > free(node.allocatable.memory, node.requested.memory) {
        mask |= MEMORY;
    }
    if request.ephemeral_storage > 0
        && request.ephemeral_storage
            > free(
                node.allocatable.ephemeral_storage,
                node.requested.ephemeral_storage,
            )
    {
        mask |= EPHEMERAL;
    }
    for (index, scalar) in request.scalars.iter().enumerate() {
        if scalar.quantity == 0 {
            continue;
        }
        // A name first seen after this pod was prepared is looked up now.
        let id = scalar.id.or_else(|| table.get(&scalar.name));
        let (allocatable, used) = id.map_or((0, 0), |id| {
            (node.allocatable.scalar(id), node.requested.scalar(id))
        });
        if scalar.via_dra && allocatable == 0 {
            continue;
        }
        if scalar.quantity > free(allocatable, used) {
            mask |= 1u64 << (FIRST_SCALAR_BIT + index.min(63 - FIRST_SCALAR_BIT));
        }
    }
    if mask == 0 { Ok(()) } else { Err(mask) }
}

/// The reasons of a failed [`check`], joined as the scheduler lists them.
pub(crate) fn reason(request: &PodRequest, mask: u64) -> String {
    let mut reasons: Vec<String> = Vec::new();
    if mask & TOO_MANY_PODS != 0 {
        reasons.push("Too many pods".into());
    }
    if mask & CPU != 0 {
        reasons.push("Insufficient cpu".into());
    }
    if mask & MEMORY != 0 {
        reasons.push("Insufficient memory".into());
    }
    if mask & EPHEMERAL != 0 {
        reasons.push("Insufficient ephemeral-storage".into());
    }
    for (index, scalar) in request.scalars.iter().enumerate() {
        if mask & (1u64 << (FIRST_SCALAR_BIT + index.min(63 - FIRST_SCALAR_BIT))) != 0 {
            reasons.push(format!("Insufficient {}", scalar.name));
        }
    }
    reasons.join(", ")
}
