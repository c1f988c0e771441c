//! Semantic checks of a [`NodeGroupSpec`] that the OpenAPI schema cannot express.
//!
//! Every problem is reported, not just the first, so a user fixes a YAML file in one go. Each
//! error names the field path the way `kubectl explain` would.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::ResourceSliceSpec;

use crate::nodegroup::{CapacityType, NodeGroupSpec, NodeTemplate};
use crate::scale_down::ScaleDownPolicy;

/// One problem found in a node group spec.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValidationError {
    /// A string field that must name something is empty.
    #[error("{field} must not be empty")]
    Empty {
        /// Field path, e.g. `spec.provider`.
        field: String,
    },
    /// A size is below zero.
    #[error("{field} must be >= 0, got {value}")]
    Negative {
        /// Field path.
        field: &'static str,
        /// The value found.
        value: i64,
    },
    /// `minSize` exceeds `maxSize`.
    #[error("spec.minSize ({min}) must be <= spec.maxSize ({max})")]
    MinAboveMax {
        /// `spec.minSize`.
        min: i32,
        /// `spec.maxSize`.
        max: i32,
    },
    /// A `reserved` group has no `reservation`.
    #[error("spec.reservation is required when spec.capacityType is reserved")]
    ReservationMissing,
    /// A group that is not `reserved` has a `reservation`.
    #[error(
        "spec.reservation is only allowed when spec.capacityType is reserved, not {capacity_type}"
    )]
    ReservationNotAllowed {
        /// The group's capacity type.
        capacity_type: CapacityType,
    },
    /// `pricePerHour` is negative, NaN or infinite.
    #[error("spec.pricePerHour must be a finite number >= 0, got {value}")]
    BadPrice {
        /// The value found.
        value: f64,
    },
    /// `spec.scaleDown.utilizationThreshold` is outside 0..=1 (or not a number).
    #[error("spec.scaleDown.utilizationThreshold must be a fraction between 0 and 1, got {value}")]
    BadThreshold {
        /// The value found.
        value: f64,
    },
    /// A `spec.scaleDown` duration does not parse.
    #[error("{field}: {error}")]
    BadDuration {
        /// Field path, e.g. `spec.scaleDown.unneededTime`.
        field: &'static str,
        /// What was wrong.
        error: crate::scale_down::BadDuration,
    },
    /// `spec.scaleDown.removeReservedNodes` on a group that is not reserved.
    #[error(
        "spec.scaleDown.removeReservedNodes only applies to reserved groups, not {capacity_type}"
    )]
    RemoveReservedNotReserved {
        /// The group's capacity type.
        capacity_type: CapacityType,
    },
    /// A template `capacity` or `allocatable` value is not a Kubernetes quantity.
    #[error("{field}: {error}")]
    BadQuantity {
        /// Field path, e.g. `spec.template.capacity.cpu`.
        field: String,
        /// What was wrong, as the quantity parser says it.
        error: dra_sim::quantity::QuantityError,
    },
    /// A template slice sets neither devices nor shared counters.
    #[error("spec.template.resourceSlices[{slice}] has neither devices nor sharedCounters")]
    EmptySlice {
        /// Index of the slice.
        slice: usize,
    },
    /// A template slice sets both devices and shared counters (forbidden since 1.35).
    #[error(
        "spec.template.resourceSlices[{slice}] sets both devices and sharedCounters; put counters in a slice of their own"
    )]
    DevicesAndCounters {
        /// Index of the slice.
        slice: usize,
    },
    /// A template slice selects nodes itself, but template slices are node-local.
    #[error(
        "spec.template.resourceSlices[{slice}].{field} must not be set: template slices belong to the node they are published for"
    )]
    NotNodeLocal {
        /// Index of the slice.
        slice: usize,
        /// The offending field (`allNodes`, `nodeSelector`, `perDeviceNodeSelection`).
        field: &'static str,
    },
    /// Two devices (or two counter sets) of one driver's pool share a name.
    #[error(
        "spec.template.resourceSlices[{slice}]: {what} name {name:?} is used twice in the pool of driver {driver}"
    )]
    Duplicate {
        /// Index of the slice where the second use is.
        slice: usize,
        /// `device` or `counter set`.
        what: &'static str,
        /// The repeated name.
        name: String,
        /// The slice's driver.
        driver: String,
    },
    /// A device consumes counters from a counter set no slice of its driver defines.
    #[error(
        "spec.template.resourceSlices[{slice}].devices[{device}].consumesCounters names counter set {counter_set:?}, which no slice of driver {driver} defines"
    )]
    UnknownCounterSet {
        /// Index of the slice.
        slice: usize,
        /// Name of the device.
        device: String,
        /// The missing counter set.
        counter_set: String,
        /// The slice's driver.
        driver: String,
    },
    /// `pool.resourceSliceCount` disagrees with the number of template slices of that driver.
    #[error(
        "spec.template.resourceSlices[{slice}].pool.resourceSliceCount is {declared}, but the template has {actual} slices for driver {driver}"
    )]
    SliceCount {
        /// Index of the slice.
        slice: usize,
        /// The slice's driver.
        driver: String,
        /// The declared count.
        declared: i64,
        /// The number of template slices with that driver.
        actual: usize,
    },
}

/// All problems found in one spec.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid node group spec: {}", join(.errors))]
pub struct InvalidNodeGroup {
    /// Every problem, in field order.
    pub errors: Vec<ValidationError>,
}

fn join(errors: &[ValidationError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl NodeGroupSpec {
    /// Checks the rules the schema cannot (and, for objects the API server did not check, those
    /// it can): `minSize <= maxSize`, a reservation exactly for reserved groups with
    /// `total >= 0`, a finite non-negative price, template quantities that parse, template slices that
    /// a driver could really publish (node-local, devices and counters apart, unique names,
    /// counters that exist, a slice count that matches), and `scaleDown` settings that parse (a
    /// threshold between 0 and 1, durations, `removeReservedNodes` only on reserved groups).
    ///
    /// # Errors
    /// [`InvalidNodeGroup`] listing every problem found.
    pub fn validate(&self) -> Result<(), InvalidNodeGroup> {
        let mut errors = Vec::new();
        for (field, value) in [
            ("spec.provider", &self.provider),
            ("spec.providerID", &self.provider_id),
        ] {
            if value.trim().is_empty() {
                errors.push(ValidationError::Empty {
                    field: field.to_owned(),
                });
            }
        }
        if self.min_size < 0 {
            errors.push(ValidationError::Negative {
                field: "spec.minSize",
                value: self.min_size.into(),
            });
        }
        if self.max_size < 0 {
            errors.push(ValidationError::Negative {
                field: "spec.maxSize",
                value: self.max_size.into(),
            });
        }
        if self.min_size > self.max_size {
            errors.push(ValidationError::MinAboveMax {
                min: self.min_size,
                max: self.max_size,
            });
        }
        match (self.capacity_type, &self.reservation) {
            (CapacityType::Reserved, None) => errors.push(ValidationError::ReservationMissing),
            (CapacityType::Reserved, Some(reservation)) => {
                if reservation.id.trim().is_empty() {
                    errors.push(ValidationError::Empty {
                        field: "spec.reservation.id".to_owned(),
                    });
                }
                if reservation.total < 0 {
                    errors.push(ValidationError::Negative {
                        field: "spec.reservation.total",
                        value: reservation.total.into(),
                    });
                }
            }
            (capacity_type, Some(_)) => {
                errors.push(ValidationError::ReservationNotAllowed { capacity_type });
            }
            (_, None) => {}
        }
        if !self.price_per_hour.is_finite() || self.price_per_hour < 0.0 {
            errors.push(ValidationError::BadPrice {
                value: self.price_per_hour,
            });
        }
        if let Some(domain) = &self.topology_domain
            && domain.key.trim().is_empty()
        {
            errors.push(ValidationError::Empty {
                field: "spec.topologyDomain.key".to_owned(),
            });
        }
        if let Some(policy) = &self.scale_down {
            validate_scale_down(policy, self.capacity_type, &mut errors);
        }
        validate_quantities(&self.template, &mut errors);
        validate_slices(&self.template.resource_slices, &mut errors);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(InvalidNodeGroup { errors })
        }
    }
}

fn validate_scale_down(
    policy: &ScaleDownPolicy,
    capacity_type: CapacityType,
    errors: &mut Vec<ValidationError>,
) {
    if let Some(value) = policy.utilization_threshold
        && !(0.0..=1.0).contains(&value)
    {
        errors.push(ValidationError::BadThreshold { value });
    }
    if let Err(error) = policy.unneeded_time() {
        errors.push(ValidationError::BadDuration {
            field: "spec.scaleDown.unneededTime",
            error,
        });
    }
    if let Err(error) = policy.empty_unneeded_time() {
        errors.push(ValidationError::BadDuration {
            field: "spec.scaleDown.emptyUnneededTime",
            error,
        });
    }
    if policy.remove_reserved_nodes.is_some() && capacity_type != CapacityType::Reserved {
        errors.push(ValidationError::RemoveReservedNotReserved { capacity_type });
    }
}

/// Every template quantity parses as the API server parses a `resource.Quantity` (the CRD's
/// pattern refuses the rest at admission; objects written before it, or files, reach here).
fn validate_quantities(template: &NodeTemplate, errors: &mut Vec<ValidationError>) {
    let lists = [
        ("capacity", Some(&template.capacity)),
        ("allocatable", template.allocatable.as_ref()),
    ];
    for (field, list) in lists {
        for (resource, quantity) in list.into_iter().flatten() {
            if let Err(error) = dra_sim::quantity::nano_value(&quantity.0) {
                errors.push(ValidationError::BadQuantity {
                    field: format!("spec.template.{field}.{resource}"),
                    error,
                });
            }
        }
    }
}

fn validate_slices(slices: &[ResourceSliceSpec], errors: &mut Vec<ValidationError>) {
    // Names are unique per pool; a template node has one pool per driver.
    let mut devices_seen: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut counters_seen: BTreeSet<(&str, &str)> = BTreeSet::new();
    for (index, slice) in slices.iter().enumerate() {
        if slice.driver.trim().is_empty() {
            errors.push(ValidationError::Empty {
                field: format!("spec.template.resourceSlices[{index}].driver"),
            });
        }
        let devices = slice.devices.as_deref().unwrap_or_default();
        let counters = slice.shared_counters.as_deref().unwrap_or_default();
        match (devices.is_empty(), counters.is_empty()) {
            (true, true) => errors.push(ValidationError::EmptySlice { slice: index }),
            (false, false) => errors.push(ValidationError::DevicesAndCounters { slice: index }),
            _ => {}
        }
        for (field, set) in [
            ("allNodes", slice.all_nodes == Some(true)),
            ("nodeSelector", slice.node_selector.is_some()),
            (
                "perDeviceNodeSelection",
                slice.per_device_node_selection == Some(true),
            ),
        ] {
            if set {
                errors.push(ValidationError::NotNodeLocal {
                    slice: index,
                    field,
                });
            }
        }
        for device in devices {
            if device.name.trim().is_empty() {
                errors.push(ValidationError::Empty {
                    field: format!("spec.template.resourceSlices[{index}].devices[].name"),
                });
            } else if !devices_seen.insert((&slice.driver, &device.name)) {
                errors.push(ValidationError::Duplicate {
                    slice: index,
                    what: "device",
                    name: device.name.clone(),
                    driver: slice.driver.clone(),
                });
            }
        }
        for set in counters {
            if !counters_seen.insert((&slice.driver, &set.name)) {
                errors.push(ValidationError::Duplicate {
                    slice: index,
                    what: "counter set",
                    name: set.name.clone(),
                    driver: slice.driver.clone(),
                });
            }
        }
        let same_driver = slices
            .iter()
            .filter(|other| other.driver == slice.driver)
            .count();
        let declared = slice.pool.resource_slice_count;
        // Zero means "not filled in"; the publisher then sets it, so only a wrong value is an error.
        if declared != 0 && usize::try_from(declared).ok() != Some(same_driver) {
            errors.push(ValidationError::SliceCount {
                slice: index,
                driver: slice.driver.clone(),
                declared,
                actual: same_driver,
            });
        }
    }
    for (index, slice) in slices.iter().enumerate() {
        for device in slice.devices.as_deref().unwrap_or_default() {
            for consumption in device.consumes_counters.as_deref().unwrap_or_default() {
                if !counters_seen
                    .contains(&(slice.driver.as_str(), consumption.counter_set.as_str()))
                {
                    errors.push(ValidationError::UnknownCounterSet {
                        slice: index,
                        device: device.name.clone(),
                        counter_set: consumption.counter_set.clone(),
                        driver: slice.driver.clone(),
                    });
                }
            }
        }
    }
}
