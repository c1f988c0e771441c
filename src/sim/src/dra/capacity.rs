//! Consumable capacity (KEP-5075): how much of each capacity a request
//! consumes on a device, whether that respects the capacity's request
//! policy, and whether it still fits next to what is already consumed.
//!
//! Upstream runs the fit check for every device, shared or not; on an
//! exclusive device nothing is consumed yet, so it acts as a "capacity ≥
//! request" filter.

use super::inventory::{CapacityEntry, DeviceEntry, Policy, Range};
use super::quantity::{Amount, Value};

/// What a request asks of each capacity, by name; `None` when the request
/// has no `capacity.requests` map.
pub(crate) type Requested<'c> = Option<&'c [(String, Value)]>;

fn requested_for<'c>(requested: Requested<'c>, name: &str) -> Option<&'c Value> {
    requested?.iter().find(|(n, _)| n == name).map(|(_, v)| v)
}

const NANOS_PER_MILLI: i128 = 1_000_000;
const NANOS_PER_UNIT: i128 = 1_000_000_000;
const MAX_INT64: i128 = i64::MAX as i128;

/// `quantity.Value()` as upstream reads it: whole units, rounded up.
fn units(v: Value) -> i128 {
    v.amount.ceil_units()
}

/// Upstream `safeMilliValue`: the value in milli units when that is exact
/// and fits an `int64`.
fn milli(v: Value) -> Option<i128> {
    let nanos = v.amount.nanos();
    (nanos % NANOS_PER_MILLI == 0)
        .then_some(nanos / NANOS_PER_MILLI)
        .filter(|m| i64::try_from(*m).is_ok())
}

/// Upstream `useMilli`: with DRAFractionalCapacityRange, ranges whose bounds
/// and step are exact milli values (step at least 1m) round in milli units.
fn use_milli(range: &Range, fractional: bool) -> bool {
    if !fractional {
        return false;
    }
    if [Some(range.min), range.max, range.step]
        .into_iter()
        .flatten()
        .any(|v| milli(v).is_none())
    {
        return false;
    }
    range.step.and_then(milli).is_none_or(|step| step >= 1)
}

/// Upstream's `errCapacityRequestNotRepresentable`: a request the range
/// arithmetic cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotRepresentable {
    /// The request has a finer part than a milli value (fractional path).
    #[error(
        "capacity request cannot be represented in the device's range arithmetic: request {request} is not a representable milli value"
    )]
    NotMilli {
        /// The request, canonical.
        request: String,
    },
    /// The request is above `MaxInt64` units (integer path).
    #[error(
        "capacity request cannot be represented in the device's range arithmetic: request {request} exceeds MaxInt64"
    )]
    ExceedsMaxInt64 {
        /// The request, canonical.
        request: String,
    },
    /// Rounding up to the next step overflows.
    #[error(
        "capacity request cannot be represented in the device's range arithmetic: rounding request {request} up to the next step passes {limit}"
    )]
    PastLimit {
        /// The request, canonical.
        request: String,
        /// `MaxInt64` or `the milli-value range`.
        limit: &'static str,
    },
}

/// A device capacity whose consumption cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("capacity {capacity:?}: {source}")]
pub(crate) struct CapacityError {
    /// The capacity's name.
    pub capacity: String,
    /// Why.
    pub source: NotRepresentable,
}

/// Upstream `roundUpRange`: a request at or above `min` rounds up to the
/// next step from `min`, written in the step's format.
///
/// # Errors
/// Upstream's `errCapacityRequestNotRepresentable`: the request or its
/// rounded value does not fit the arithmetic used.
fn round_up_range(
    requested: Value,
    range: &Range,
    fractional: bool,
) -> Result<Value, NotRepresentable> {
    if requested.amount < range.min.amount {
        return Ok(range.min);
    }
    let Some(step) = range.step else {
        return Ok(requested);
    };
    let milli_path = use_milli(range, fractional);
    let (min, step_n, req) = if milli_path {
        let Some(req) = milli(requested) else {
            return Err(NotRepresentable::NotMilli {
                request: requested.canonical(),
            });
        };
        let (Some(min), Some(step_n)) = (milli(range.min), milli(step)) else {
            return Ok(requested);
        };
        (min, step_n, req)
    } else {
        if units(requested) > MAX_INT64 {
            return Err(NotRepresentable::ExceedsMaxInt64 {
                request: requested.canonical(),
            });
        }
        (units(range.min), units(step), units(requested))
    };
    if step_n == 0 {
        // Refused by API validation; upstream would divide by zero.
        return Ok(requested);
    }
    // Truncating division and remainder, as Go's int64 arithmetic does.
    let added = req - min;
    let mut n = added / step_n;
    if added % step_n != 0 {
        n += 1;
    }
    // The integer path skips the guard for a negative min, as upstream does.
    if (milli_path || min >= 0) && n > (MAX_INT64 - min) / step_n {
        let limit = if milli_path {
            "the milli-value range"
        } else {
            "MaxInt64"
        };
        return Err(NotRepresentable::PastLimit {
            request: requested.canonical(),
            limit,
        });
    }
    let scale = if milli_path {
        NANOS_PER_MILLI
    } else {
        NANOS_PER_UNIT
    };
    Ok(Value {
        amount: Amount::from_nanos((min + step_n * n) * scale),
        format: step.format,
    })
}

/// Upstream `calculateConsumedCapacity`: the amount a request consumes of
/// one capacity after applying the request policy's default and rounding.
///
/// # Errors
/// A request the range arithmetic cannot represent (fatal upstream).
pub(crate) fn consumed_value(
    requested: Option<&Value>,
    capacity: &CapacityEntry,
    fractional: bool,
) -> Result<Value, NotRepresentable> {
    let Some(requested) = requested else {
        return Ok(match capacity.policy.as_ref().and_then(|p| p.default) {
            Some(default) => default,
            None => capacity.value,
        });
    };
    let Some(policy) = &capacity.policy else {
        return Ok(*requested);
    };
    if let Some(range) = &policy.valid_range {
        return round_up_range(*requested, range, fractional);
    }
    if let Some(values) = &policy.valid_values {
        return Ok(values
            .iter()
            .find(|v| requested.amount <= v.amount)
            .copied()
            .unwrap_or(*requested));
    }
    Ok(*requested)
}

/// Upstream `violatesPolicy`.
pub(crate) fn violates_policy(consumed: Value, policy: Option<&Policy>, fractional: bool) -> bool {
    let Some(policy) = policy else { return false };
    if policy.default.is_some_and(|d| d.amount == consumed.amount) {
        return false;
    }
    if let Some(range) = &policy.valid_range {
        if range.max.is_some_and(|max| consumed.amount > max.amount) {
            return true;
        }
        if let Some(step) = range.step {
            let (req, step_n, min) = if use_milli(range, fractional) {
                let (Some(req), Some(step_n), Some(min)) =
                    (milli(consumed), milli(step), milli(range.min))
                else {
                    return true;
                };
                (req, step_n, min)
            } else {
                (units(consumed), units(step), units(range.min))
            };
            if step_n != 0 && (req - min) % step_n != 0 {
                return true;
            }
        }
        return false;
    }
    match &policy.valid_values {
        Some(values) if !values.is_empty() => !values.iter().any(|v| v.amount == consumed.amount),
        _ => false,
    }
}

/// Upstream `CmpRequestOverCapacity`: `Ok(None)` when the request names a
/// capacity the device lacks (the device is skipped), otherwise whether
/// every capacity still fits. `consumed` and `allocating` are aligned with
/// the device's capacities. Every capacity is rounded before any is
/// compared, so an unrepresentable request is an error whatever else fails.
///
/// # Errors
/// A request the range arithmetic cannot represent (fatal upstream).
pub(crate) fn fits(
    requested: Requested<'_>,
    device: &DeviceEntry,
    consumed: Option<&[Amount]>,
    allocating: Option<&[Amount]>,
    fractional: bool,
) -> Result<Option<bool>, CapacityError> {
    if let Some(requested) = requested {
        for (name, _) in requested {
            if !device.capacities.iter().any(|c| &c.name == name) {
                return Ok(None);
            }
        }
    }
    let values = consumed_by(requested, device, fractional)?;
    for (i, (capacity, value)) in device.capacities.iter().zip(&values).enumerate() {
        if violates_policy(*value, capacity.policy.as_ref(), fractional) {
            return Ok(Some(false));
        }
        let mut total = value.amount;
        if let Some(c) = consumed.and_then(|c| c.get(i)) {
            total = total.plus(*c);
        }
        if let Some(a) = allocating.and_then(|a| a.get(i)) {
            total = total.plus(*a);
        }
        if total > capacity.value.amount {
            return Ok(Some(false));
        }
    }
    Ok(Some(true))
}

/// Upstream `GetConsumedCapacityFromRequest`: every capacity of the device.
///
/// # Errors
/// As [`consumed_value`].
pub(crate) fn consumed_by(
    requested: Requested<'_>,
    device: &DeviceEntry,
    fractional: bool,
) -> Result<Vec<Value>, CapacityError> {
    device
        .capacities
        .iter()
        .map(|c| {
            consumed_value(requested_for(requested, &c.name), c, fractional).map_err(|source| {
                CapacityError {
                    capacity: c.name.clone(),
                    source,
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
