//! Selector evaluation with caches that outlive one `allocate` call.
//!
//! A selector's verdict on a device depends only on the expression and the
//! device's content, and devices never change while their slice exists, so
//! verdicts are cached per (device cache slot, expression id). Expressions are
//! compiled lazily, on their first evaluation, because upstream only reports a
//! compile error when some device is actually checked against it. Errors are
//! never cached as verdicts: they abort the call, as upstream's do.

use std::sync::Arc;

use crate::cel::{CelDevice, CelError, CompiledSelector, SelectorCompiler};
use crate::gates::FeatureGates;

use super::inventory::DeviceEntry;
use super::state::FixedMap;

/// Why a selector could not be evaluated.
#[derive(Debug, Clone)]
pub(crate) enum EvalError {
    /// The expression does not compile.
    Compile(String),
    /// The expression failed on this device.
    Runtime(String),
}

/// Why a selector id has no program.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProgramError {
    /// The expression does not compile.
    #[error(transparent)]
    Compile(CelError),
    /// An id [`SelectorTable::id`] never gave out (a bug, reported rather than a panic).
    #[error("internal: unknown selector id {0}")]
    UnknownId(u32),
}

/// Interned expressions and their compiled programs.
pub(crate) struct SelectorTable {
    compiler: SelectorCompiler,
    ids: FixedMap<String, u32>,
    expressions: Vec<String>,
    compiled: Vec<Option<Result<Arc<CompiledSelector>, CelError>>>,
}

impl SelectorTable {
    pub fn new(gates: &FeatureGates) -> Self {
        SelectorTable {
            compiler: SelectorCompiler::new(gates),
            ids: FixedMap::default(),
            expressions: Vec::new(),
            compiled: Vec::new(),
        }
    }

    /// The id of an expression, assigned on first sight.
    pub fn id(&mut self, expression: &str) -> u32 {
        if let Some(id) = self.ids.get(expression) {
            return *id;
        }
        let id = u32::try_from(self.compiled.len()).unwrap_or(u32::MAX);
        self.ids.insert(expression.to_string(), id);
        self.expressions.push(expression.to_string());
        self.compiled.push(None);
        id
    }

    fn program(&mut self, id: u32) -> Result<Arc<CompiledSelector>, ProgramError> {
        let idx = id as usize;
        if self.compiled.get(idx).is_some_and(Option::is_none) {
            let result = self.compiler.compile(&self.expressions[idx]);
            self.compiled[idx] = Some(result);
        }
        match self.compiled.get(idx) {
            Some(Some(result)) => result.clone().map_err(ProgramError::Compile),
            _ => Err(ProgramError::UnknownId(id)),
        }
    }
}

/// Per-device caches: the CEL view of the device and selector verdicts.
#[derive(Default)]
struct DeviceCache {
    device: Option<CelDevice>,
    verdicts: Vec<(u32, bool)>,
}

/// Cache entries indexed by the devices' slots; slots of removed slices are
/// cleared and reused.
#[derive(Default)]
pub(crate) struct DeviceCaches {
    entries: Vec<DeviceCache>,
    free: Vec<u32>,
}

impl DeviceCaches {
    /// A slot for a new device.
    pub fn allocate_slot(&mut self) -> u32 {
        if let Some(slot) = self.free.pop() {
            return slot;
        }
        self.entries.push(DeviceCache::default());
        u32::try_from(self.entries.len() - 1).unwrap_or(u32::MAX)
    }

    /// Forgets a removed device.
    pub fn release_slot(&mut self, slot: u32) {
        if let Some(entry) = self.entries.get_mut(slot as usize) {
            *entry = DeviceCache::default();
            self.free.push(slot);
        }
    }

    /// A cached verdict, if any.
    pub fn cached(&self, slot: u32, id: u32) -> Option<bool> {
        self.entries
            .get(slot as usize)?
            .verdicts
            .iter()
            .find(|(i, _)| *i == id)
            .map(|(_, v)| *v)
    }

    /// Evaluates selector `id` on a device, using and filling the caches.
    pub fn evaluate(
        &mut self,
        table: &mut SelectorTable,
        gates: &FeatureGates,
        driver: &str,
        device: &DeviceEntry,
        id: u32,
    ) -> Result<bool, EvalError> {
        if let Some(v) = self.cached(device.slot, id) {
            return Ok(v);
        }
        let program = table
            .program(id)
            .map_err(|e| EvalError::Compile(e.to_string()))?;
        let idx = device.slot as usize;
        if idx >= self.entries.len() {
            self.entries.resize_with(idx + 1, DeviceCache::default);
        }
        let entry = &mut self.entries[idx];
        let cel_device = entry
            .device
            .get_or_insert_with(|| CelDevice::new(driver, &device.raw, gates));
        let verdict = program
            .matches(cel_device)
            .map_err(|e| EvalError::Runtime(e.to_string()))?;
        entry.verdicts.push((id, verdict));
        Ok(verdict)
    }
}
