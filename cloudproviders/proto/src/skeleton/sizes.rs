//! The size rules of externalgrpc's scaling calls, with the answers a provider gives when a
//! call breaks one (gRPC INVALID_ARGUMENT): `IncreaseSize` takes a positive delta and stays
//! within maxSize, `DecreaseTargetSize` a negative one that drops only machines never
//! started, `DeleteNodes` stays at or above minSize, and `AtomicIncreaseSize` needs
//! `1 <= minCount <= count` and room for `minCount` more.

use crate::error::ProviderError;
use crate::model::AtomicIncrease;

fn invalid(message: String) -> ProviderError {
    ProviderError::InvalidArgument { message }
}

/// `IncreaseSize` of group `id` takes `delta > 0`.
///
/// # Errors
/// [`ProviderError::InvalidArgument`] for `delta <= 0`.
pub fn check_increase(id: &str, delta: i32) -> Result<(), ProviderError> {
    if delta <= 0 {
        return Err(invalid(format!(
            "increase of node group {id:?} needs delta > 0, got {delta}"
        )));
    }
    Ok(())
}

/// `DecreaseTargetSize` of group `id` takes `delta < 0`.
///
/// # Errors
/// [`ProviderError::InvalidArgument`] for `delta >= 0`.
pub fn check_decrease(id: &str, delta: i32) -> Result<(), ProviderError> {
    if delta >= 0 {
        return Err(invalid(format!(
            "decrease of node group {id:?} needs delta < 0, got {delta}"
        )));
    }
    Ok(())
}

/// An increase of group `id` to `target` machines stays within `max_size`.
///
/// # Errors
/// [`ProviderError::InvalidArgument`] when `target > max_size`.
pub fn check_max_size(id: &str, target: i32, max_size: i32) -> Result<(), ProviderError> {
    if target > max_size {
        return Err(invalid(format!(
            "node group {id:?}: size {target} would exceed maxSize {max_size}"
        )));
    }
    Ok(())
}

/// Deleting `count` machines of group `id` leaves `remaining`, at least `min_size`.
///
/// # Errors
/// [`ProviderError::InvalidArgument`] when `remaining < min_size`.
pub fn check_min_size(
    id: &str,
    count: usize,
    remaining: i32,
    min_size: i32,
) -> Result<(), ProviderError> {
    if remaining < min_size {
        return Err(invalid(format!(
            "deleting {count} nodes would take node group {id:?} below minSize {min_size}"
        )));
    }
    Ok(())
}

/// A decrease of group `id` to `target` keeps its `existing` machines (named `machines`, e.g.
/// "instances"): as cluster-autoscaler, only machines never started can be dropped.
///
/// # Errors
/// [`ProviderError::InvalidArgument`] when `target < existing`.
pub fn check_started_kept(
    id: &str,
    existing: i32,
    machines: &str,
    target: i32,
) -> Result<(), ProviderError> {
    if target < existing {
        return Err(invalid(format!(
            "node group {id:?} has {existing} {machines}; its target cannot go to {target}"
        )));
    }
    Ok(())
}

/// `AtomicIncreaseSize` needs `1 <= minCount <= count`.
///
/// # Errors
/// [`ProviderError::InvalidArgument`] otherwise.
pub fn check_atomic_bounds(request: &AtomicIncrease) -> Result<(), ProviderError> {
    if request.min_count < 1 || request.count < request.min_count {
        return Err(invalid(format!(
            "node group {:?}: need 1 <= minCount <= count, got minCount {} count {}",
            request.id, request.min_count, request.count
        )));
    }
    Ok(())
}

/// How many machines group `id` of `size` can still take under `max_size`, when that is at
/// least `min_count` (an atomic start of fewer is no start).
///
/// # Errors
/// [`ProviderError::InvalidArgument`] when fewer than `min_count` fit.
pub fn headroom(id: &str, size: i32, max_size: i32, min_count: i32) -> Result<i32, ProviderError> {
    let headroom = max_size - size;
    if headroom < min_count {
        return Err(invalid(format!(
            "node group {id:?}: {min_count} more machines would exceed maxSize {max_size} (size {size})"
        )));
    }
    Ok(headroom)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(count: i32, min_count: i32) -> AtomicIncrease {
        AtomicIncrease {
            id: "g".into(),
            count,
            min_count,
            request_id: String::new(),
        }
    }

    #[test]
    fn deltas_have_the_sign_each_call_documents() {
        // externalgrpc: IncreaseSize's delta is positive, DecreaseTargetSize's negative.
        assert!(check_increase("g", 1).is_ok());
        assert!(check_increase("g", 0).is_err());
        assert!(check_decrease("g", -1).is_ok());
        assert!(check_decrease("g", 0).is_err());
        assert_eq!(
            check_decrease("g", 2),
            Err(invalid(
                "decrease of node group \"g\" needs delta < 0, got 2".into()
            ))
        );
    }

    #[test]
    fn max_size_is_reachable_and_not_passable() {
        assert!(check_max_size("g", 4, 4).is_ok());
        assert!(check_max_size("g", 5, 4).is_err());
        assert!(check_min_size("g", 2, 1, 1).is_ok());
        assert!(check_min_size("g", 2, 0, 1).is_err());
        assert!(check_started_kept("g", 3, "VMs", 3).is_ok());
        assert!(check_started_kept("g", 3, "VMs", 2).is_err());
    }

    #[test]
    fn atomic_bounds_need_one_to_count() {
        assert!(check_atomic_bounds(&request(4, 4)).is_ok());
        assert!(check_atomic_bounds(&request(4, 1)).is_ok());
        assert!(check_atomic_bounds(&request(4, 0)).is_err());
        assert!(check_atomic_bounds(&request(3, 4)).is_err());
    }

    #[test]
    fn headroom_must_hold_min_count_not_count() {
        // minCount is what makes the start worthwhile; count may be cut to what fits.
        assert_eq!(headroom("g", 6, 8, 2), Ok(2));
        assert!(headroom("g", 7, 8, 2).is_err());
        assert!(headroom("g", 9, 8, 0).is_err());
    }
}
