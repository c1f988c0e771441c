//! Shrinks a cluster on which the engines disagree: drops objects, then
//! devices, requests, constraints and counter sets inside the objects left,
//! keeping each removal only while the engines still disagree. What is left
//! is usually a handful of objects that show the difference.

use serde_json::Value;

/// The arrays inside an object whose elements may be dropped one by one.
const INNER_LISTS: &[&str] = &[
    "/spec/devices",
    "/spec/sharedCounters",
    "/spec/devices/requests",
    "/spec/devices/constraints",
    "/spec/spec/devices/requests",
    "/spec/spec/devices/constraints",
    "/status/allocation/devices/results",
    "/spec/resourceClaims",
];

/// Shrinks `objects` while `still_disagrees` holds, asking it at most
/// `budget` times. Returns the smallest cluster found.
pub fn shrink(
    objects: &[Value],
    budget: usize,
    mut still_disagrees: impl FnMut(&[Value]) -> bool,
) -> Vec<Value> {
    let mut current = objects.to_vec();
    let asked = std::cell::Cell::new(0usize);
    let mut ask = |candidate: &[Value]| {
        asked.set(asked.get() + 1);
        asked.get() <= budget && still_disagrees(candidate)
    };
    loop {
        let before = size(&current);
        // Whole objects, in halving chunks.
        let mut chunk = current.len().div_ceil(2).max(1);
        loop {
            let mut i = 0;
            while i < current.len() {
                let end = (i + chunk).min(current.len());
                let mut candidate = current.clone();
                candidate.drain(i..end);
                if ask(&candidate) {
                    current = candidate;
                } else {
                    i += chunk;
                }
            }
            if chunk == 1 {
                break;
            }
            chunk = chunk.div_ceil(2);
        }
        // Elements of lists inside the objects.
        for o in 0..current.len() {
            for path in INNER_LISTS {
                let mut e = 0;
                while let Some(len) = current[o]
                    .pointer(path)
                    .and_then(Value::as_array)
                    .map(Vec::len)
                {
                    if e >= len {
                        break;
                    }
                    let mut candidate = current.clone();
                    if let Some(Value::Array(items)) = candidate[o].pointer_mut(path) {
                        items.remove(e);
                    }
                    if ask(&candidate) {
                        current = candidate;
                    } else {
                        e += 1;
                    }
                }
            }
        }
        if size(&current) == before || asked.get() > budget {
            return current;
        }
    }
}

/// How big a cluster is, to see whether a round shrank it.
fn size(objects: &[Value]) -> usize {
    objects.iter().map(|o| o.to_string().len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_only_what_the_disagreement_needs() {
        let objects: Vec<Value> = (0..20)
            .map(|i| json!({"kind": "X", "n": i, "spec": {"devices": [1, 2, 3, i]}}))
            .collect();
        // "Disagrees" while objects 3 and 17 are there and 17 still has device 2.
        let shrunk = shrink(&objects, 10_000, |c| {
            c.iter().any(|o| o["n"] == 3)
                && c.iter().any(|o| {
                    o["n"] == 17
                        && o["spec"]["devices"]
                            .as_array()
                            .is_some_and(|d| d.contains(&json!(2)))
                })
        });
        assert_eq!(shrunk.len(), 2);
        assert_eq!(shrunk[0]["n"], 3);
        assert_eq!(shrunk[0]["spec"]["devices"], json!([]));
        assert_eq!(shrunk[1]["spec"]["devices"], json!([2]));
    }

    #[test]
    fn stops_at_the_budget() {
        let objects: Vec<Value> = (0..50).map(|i| json!({"n": i})).collect();
        let mut calls = 0;
        let shrunk = shrink(&objects, 5, |_| {
            calls += 1;
            true
        });
        assert!(calls <= 5);
        assert!(shrunk.len() < 50);
    }
}
