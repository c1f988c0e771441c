//! Why a plan stops where it does: after planning, each scale-up names the
//! limit its group reached and the limits of the groups that would have been
//! chosen first for the same gangs. Without these lines a reader of
//! `h200-on-demand +1` cannot tell that the reservation ran out.

use std::collections::BTreeMap;

use super::{Expander, Planner};
use crate::groups::Group;
use crate::report::ScaleUp;

impl Planner<'_> {
    /// Fills `why` of every scale-up from the budget after planning.
    pub(super) fn explain_limits(&self, scale_ups: &mut [ScaleUp]) {
        let index: BTreeMap<&str, usize> = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.name.as_str(), i))
            .collect();
        // The limit each scaled group has reached, if any, in words.
        let full: Vec<Option<String>> = scale_ups
            .iter()
            .map(|s| {
                let g = *index.get(s.node_group.as_str())?;
                self.budget
                    .left(g, |h| self.used[h])
                    .err()
                    .map(|limit| limit.to_string())
            })
            .collect();
        let mut why: Vec<Vec<String>> = vec![Vec::new(); scale_ups.len()];
        for (i, s) in scale_ups.iter().enumerate() {
            if let Some(limit) = &full[i] {
                why[i].push(format!("no room for more: {limit}"));
            }
            let Some(&g) = index.get(s.node_group.as_str()) else {
                continue;
            };
            for (j, other) in scale_ups.iter().enumerate() {
                let (Some(limit), Some(&h)) = (&full[j], index.get(other.node_group.as_str()))
                else {
                    continue;
                };
                let shared: Vec<String> = other
                    .pod_groups
                    .iter()
                    .filter(|gang| s.pod_groups.contains(gang))
                    .map(ToString::to_string)
                    .collect();
                if h == g
                    || shared.is_empty()
                    || !ranks_before(self.options.expander, &self.groups[h], &self.groups[g])
                {
                    continue;
                }
                why[i].push(format!(
                    "{} comes first for {} but has no room for more: {limit}",
                    other.node_group,
                    shared.join(", ")
                ));
            }
        }
        for (s, why) in scale_ups.iter_mut().zip(why) {
            s.why = why;
        }
    }
}

/// Whether the expander prefers a node of `a` to a node of `b` when both can
/// take a gang: the per-node form of its ranking (priority first for
/// `priority`; then price, then capacity type reserved → on-demand → spot).
fn ranks_before(expander: Expander, a: &Group, b: &Group) -> bool {
    if expander == Expander::Priority && a.spec.priority != b.spec.priority {
        return a.spec.priority > b.spec.priority;
    }
    let (pa, pb) = (a.spec.price_per_hour, b.spec.price_per_hour);
    if (pa - pb).abs() > f64::EPSILON {
        return pa < pb;
    }
    a.capacity_rank() < b.capacity_rank()
}
