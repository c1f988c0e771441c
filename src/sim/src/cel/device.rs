//! The value bound to `device`, built once per device and shared by every
//! selector evaluated on it.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};
use kube_cel::cel::objects::Key;
use kube_cel::cel::{Context, Value};

use super::library::{
    ATTR_DOMAIN_PREFIX, CAP_DOMAIN_PREFIX, DEVICE_FIELDS, FIELD_PREFIX, ROOT, quantity_value,
    semver_value,
};
use super::quantity::Quantity;
use super::semver::{Semver, SemverError};
use crate::gates::FeatureGates;

/// A device converted for CEL evaluation.
///
/// It owns a child scope of the shared function root holding the hidden
/// per-field and per-domain variables the checker rewrites lookups into, so
/// evaluating a selector copies no maps.
pub struct CelDevice {
    scope: Context<'static>,
    /// Why the device cannot be evaluated at all, upstream's wording.
    conversion_error: Option<String>,
    /// First list-valued attribute, kept when DRAListTypeAttributes is off:
    /// schedulers before 1.37 refuse such devices (see [`CelDevice::list_attribute`]).
    list_attribute: Option<String>,
}

impl fmt::Debug for CelDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CelDevice")
            .field("conversion_error", &self.conversion_error)
            .field("list_attribute", &self.list_attribute)
            .finish_non_exhaustive()
    }
}

/// Splits a qualified name at the first `/`; a bare name belongs to the driver.
fn split_name<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

fn string(s: &str) -> Value {
    Value::String(Arc::new(s.to_string()))
}

/// Why a device attribute has no CEL value, in upstream's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum AttributeError {
    /// A `version` that is not strict semver 2.0.0.
    #[error("parse semantic version: {0}")]
    Version(#[from] SemverError),
    /// An attribute with none of the value fields set.
    #[error("unsupported attribute value")]
    Unsupported,
}

fn parse_version(v: &str) -> Result<Value, AttributeError> {
    Ok(semver_value(Semver::parse(v)?))
}

/// Upstream's `getAttributeValue` (1.37): list forms first, then scalars.
fn attribute_value(attr: &DeviceAttribute) -> Result<Value, AttributeError> {
    let list = |items: Vec<Value>| Value::List(Arc::new(items));
    if let Some(v) = &attr.ints {
        return Ok(list(v.iter().map(|i| Value::Int(*i)).collect()));
    }
    if let Some(v) = &attr.bools {
        return Ok(list(v.iter().map(|b| Value::Bool(*b)).collect()));
    }
    if let Some(v) = &attr.strings {
        return Ok(list(v.iter().map(|s| string(s)).collect()));
    }
    if let Some(v) = &attr.versions {
        return v
            .iter()
            .map(|s| parse_version(s))
            .collect::<Result<Vec<_>, _>>()
            .map(list);
    }
    if let Some(i) = attr.int {
        return Ok(Value::Int(i));
    }
    if let Some(b) = attr.bool {
        return Ok(Value::Bool(b));
    }
    if let Some(s) = &attr.string {
        return Ok(string(s));
    }
    if let Some(v) = &attr.version {
        return parse_version(v);
    }
    Err(AttributeError::Unsupported)
}

fn is_list(attr: &DeviceAttribute) -> bool {
    attr.ints.is_some() || attr.bools.is_some() || attr.strings.is_some() || attr.versions.is_some()
}

fn to_map(entries: BTreeMap<String, Value>) -> Value {
    Value::from(
        entries
            .into_iter()
            .map(|(k, v)| (Key::String(Arc::new(k)), v))
            .collect::<HashMap<Key, Value>>(),
    )
}

impl CelDevice {
    /// Converts `device`, published by `driver`, for CEL.
    ///
    /// Never fails: a value that cannot be converted (a `version` attribute
    /// that is not strict semver 2.0.0, an attribute without a value, a
    /// capacity that is not a quantity) is remembered and surfaces as a
    /// runtime error from [`super::CompiledSelector::matches`], as upstream
    /// fails every selector on such a device.
    #[must_use]
    pub fn new(driver: &str, device: &Device, gates: &FeatureGates) -> Self {
        let mut conversion_error = None;
        let mut list_attribute = None;
        let mut attributes: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
        for (name, attr) in device.attributes.iter().flatten() {
            if !gates.list_type_attributes && list_attribute.is_none() && is_list(attr) {
                list_attribute = Some(name.clone());
            }
            match attribute_value(attr) {
                Ok(value) => {
                    let (domain, id) = split_name(name, driver);
                    attributes
                        .entry(domain.to_string())
                        .or_default()
                        .insert(id.to_string(), value);
                }
                Err(e) => {
                    conversion_error.get_or_insert_with(|| format!("attribute {name}: {e}"));
                }
            }
        }
        let mut capacity: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
        for (name, cap) in device.capacity.iter().flatten() {
            // The API server's JSON decoding trims surrounding blanks.
            match Quantity::parse(cap.value.0.trim()) {
                Ok(q) => {
                    let (domain, id) = split_name(name, driver);
                    capacity
                        .entry(domain.to_string())
                        .or_default()
                        .insert(id.to_string(), quantity_value(q));
                }
                Err(e) => {
                    conversion_error.get_or_insert_with(|| format!("capacity {name}: {e}"));
                }
            }
        }

        let mut scope = ROOT.new_inner_scope();
        let attribute_domains: BTreeMap<String, Value> = attributes
            .into_iter()
            .map(|(d, ids)| (d, to_map(ids)))
            .collect();
        let capacity_domains: BTreeMap<String, Value> = capacity
            .into_iter()
            .map(|(d, ids)| (d, to_map(ids)))
            .collect();
        for (domain, ids) in &attribute_domains {
            scope.add_variable_from_value(format!("{ATTR_DOMAIN_PREFIX}{domain}"), ids.clone());
        }
        for (domain, ids) in &capacity_domains {
            scope.add_variable_from_value(format!("{CAP_DOMAIN_PREFIX}{domain}"), ids.clone());
        }
        // The stable allocator builds its CEL device without
        // allowMultipleAllocations (`cel.Device{Driver, Attributes, Capacity}`
        // in structured/internal/stable/allocator_stable.go), so there
        // selectors read false whatever the slice says.
        let stable =
            crate::dra::Features::from_gates(gates).variant() == crate::dra::Variant::Stable;
        let fields = [
            string(driver),
            Value::Bool(!stable && device.allow_multiple_allocations.unwrap_or(false)),
            to_map(attribute_domains),
            to_map(capacity_domains),
        ];
        for (field, value) in DEVICE_FIELDS.iter().zip(fields) {
            scope.add_variable_from_value(format!("{FIELD_PREFIX}{field}"), value);
        }
        Self {
            scope,
            conversion_error,
            list_attribute,
        }
    }

    /// The scope selectors evaluate in.
    pub(crate) fn scope(&self) -> &Context<'static> {
        &self.scope
    }

    /// Why this device cannot be evaluated, if it cannot.
    pub(crate) fn conversion_error(&self) -> Option<&str> {
        self.conversion_error.as_deref()
    }

    /// The first list-valued attribute, recorded only when the
    /// DRAListTypeAttributes gate is off. Schedulers before 1.37 then did not
    /// convert list values and failed every selector on the device with
    /// "unsupported attribute value"; 1.37 converts them regardless.
    pub(crate) fn list_attribute(&self) -> Option<&str> {
        self.list_attribute.as_deref()
    }
}
