//! Every rule that chooses between node groups, as cluster-autoscaler's
//! `expander/{price,priority,waste}`: the group-by-group ranking of
//! [`Choice`]s, the buying order inside a size class, the member a packed
//! node is bought as, and the class a packed pod opens a node of.

use std::collections::BTreeMap;

use dra_sim::filters::Allocatable;

use super::{Attempt, Planner};
use crate::groups::Group;

/// How to choose between groups that can all take a gang. Written as
/// [`Expander::as_str`] says (`least-cost`, `priority`, `least-waste`): the
/// one table between the enum and its spelling, used by `Display`,
/// `FromStr` and, with the `clap` feature, clap's `ValueEnum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expander {
    /// Lowest summed `pricePerHour` of the new nodes (reserved capacity at its
    /// own price, normally 0); ties go to fewer nodes, then capacity type
    /// (reserved, on-demand, spot), then group name.
    #[default]
    LeastCost,
    /// Highest `priority` first, then as least-cost.
    Priority,
    /// Least unused CPU and memory on the new nodes, then as least-cost.
    LeastWaste,
}

impl Expander {
    /// Every expander, in declaration order.
    pub const ALL: [Expander; 3] = [
        Expander::LeastCost,
        Expander::Priority,
        Expander::LeastWaste,
    ];

    /// The expander's name, as flags and the chart take it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Expander::LeastCost => "least-cost",
            Expander::Priority => "priority",
            Expander::LeastWaste => "least-waste",
        }
    }

    /// One line on what it prefers, for `--help`.
    #[must_use]
    pub fn summary(self) -> &'static str {
        match self {
            Expander::LeastCost => "lowest price of the new nodes",
            Expander::Priority => "highest NodeGroup priority, then least-cost",
            Expander::LeastWaste => "least unused CPU and memory, then least-cost",
        }
    }
}

impl std::fmt::Display for Expander {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Expander {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Expander::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| {
                format!("unknown expander {s:?}: expected least-cost, priority or least-waste")
            })
    }
}

#[cfg(feature = "clap")]
impl clap::ValueEnum for Expander {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.as_str()).help(self.summary()))
    }
}

/// A group that can take waiting members, as probed: one fresh node of it
/// takes `yield_per_node` of them and leaves `waste` of its CPU and memory;
/// `holds_rest` when its room left holds every waiting member at that yield.
#[derive(Debug, Clone)]
pub(super) struct Choice {
    pub(super) group: usize,
    pub(super) yield_per_node: usize,
    pub(super) waste: f64,
    pub(super) holds_rest: bool,
}

/// A size class a packed pod could open a node of: the class, the member the
/// node would be bought as, that member's score (see
/// [`Planner::pick_member`]) and how many nodes of the class the pass has
/// opened.
#[derive(Debug, Clone, Copy)]
pub(super) struct ClassChoice {
    pub(super) class: usize,
    pub(super) member: usize,
    pub(super) score: f64,
    pub(super) opened: usize,
}

impl Planner<'_> {
    /// Is `a` a better next group than `b` under the expander?
    pub(super) fn better(&self, a: &Choice, b: &Choice) -> bool {
        let (ga, gb) = (&self.groups[a.group], &self.groups[b.group]);
        // Cost per member placed: the least-cost objective, node by node.
        let per_member = |g: &Group, c: &Choice| g.spec.price_per_hour / c.yield_per_node as f64;
        // At the same cost, a group that holds every waiting member keeps a gang in one
        // group (one zone, one provider request): a gang split over groups starts whole
        // only if every group's request succeeds.
        let least_cost = per_member(ga, a)
            .total_cmp(&per_member(gb, b))
            .then_with(|| b.holds_rest.cmp(&a.holds_rest))
            .then_with(|| b.yield_per_node.cmp(&a.yield_per_node))
            .then_with(|| ga.capacity_rank().cmp(&gb.capacity_rank()))
            .then_with(|| ga.name.cmp(&gb.name));
        let order = match self.options.expander {
            Expander::LeastCost => least_cost,
            Expander::Priority => gb.spec.priority.cmp(&ga.spec.priority).then(least_cost),
            Expander::LeastWaste => a.waste.total_cmp(&b.waste).then(least_cost),
        };
        order.is_lt()
    }

    /// Is landing attempt `a` (in one domain) better than `b` (in another)?
    /// Least-cost: cheaper, then fewer new nodes, then fewer groups. Priority: the lowest
    /// priority among the groups it buys from is higher, then as least-cost.
    /// Least-waste: less CPU and memory left unused on its new nodes, then
    /// as least-cost.
    pub(super) fn better_attempt(&self, a: &Attempt, b: &Attempt) -> bool {
        let least_cost = a
            .cost
            .total_cmp(&b.cost)
            .then_with(|| a.node_count().cmp(&b.node_count()))
            .then_with(|| a.new_nodes.len().cmp(&b.new_nodes.len()));
        let lowest_priority = |attempt: &Attempt| {
            attempt
                .new_nodes
                .keys()
                .map(|&g| self.groups[g].spec.priority)
                .min()
                .unwrap_or(i32::MAX)
        };
        let order = match self.options.expander {
            Expander::LeastCost => least_cost,
            Expander::Priority => lowest_priority(b).cmp(&lowest_priority(a)).then(least_cost),
            Expander::LeastWaste => a.waste.total_cmp(&b.waste).then(least_cost),
        };
        order.is_lt()
    }

    /// The order in which members of a class are bought: price, capacity
    /// type (reserved first), name.
    pub(super) fn cheaper(&self, a: usize, b: usize) -> std::cmp::Ordering {
        let (ga, gb) = (&self.groups[a], &self.groups[b]);
        ga.spec
            .price_per_hour
            .total_cmp(&gb.spec.price_per_hour)
            .then_with(|| ga.capacity_rank().cmp(&gb.capacity_rank()))
            .then_with(|| ga.name.cmp(&gb.name))
    }

    /// Is opening a node of class `a` better for a pod than of class `b`?
    /// The member's score, then its price and capacity type; equally cheap
    /// classes (zones, say) take turns, as cluster-autoscaler's balancing of
    /// similar node groups does, so that a later pod that must spread finds
    /// a node in every class; then the member's name.
    pub(super) fn better_class(&self, a: ClassChoice, b: ClassChoice) -> bool {
        let (ga, gb) = (&self.groups[a.member], &self.groups[b.member]);
        a.score
            .total_cmp(&b.score)
            .then_with(|| ga.spec.price_per_hour.total_cmp(&gb.spec.price_per_hour))
            .then_with(|| ga.capacity_rank().cmp(&gb.capacity_rank()))
            .then_with(|| a.opened.cmp(&b.opened))
            .then_with(|| ga.name.cmp(&gb.name))
            .is_lt()
    }

    /// The member of a class to buy for what `node_index` holds (plus
    /// `extra`): one with room that holds it — under least-cost the first
    /// in buying order, under priority the highest `priority`, under
    /// least-waste the one leaving the smallest share of its CPU and memory
    /// unused (ties in buying order). Returns it with its score for
    /// comparing classes, lower being better (0 under least-cost, minus the
    /// priority, or the unused share).
    pub(super) fn pick_member(
        &self,
        members: &[usize],
        (node_index, extra): (usize, Option<&Allocatable>),
        allocatables: &BTreeMap<usize, Allocatable>,
        planned: impl Fn(usize) -> usize,
    ) -> Option<(usize, f64)> {
        let mut holding = members.iter().copied().filter(|&g| {
            self.budget.left(g, &planned).is_ok_and(|n| n > 0)
                && allocatables
                    .get(&g)
                    .is_some_and(|a| self.snapshot.usage_fits(node_index, extra, a))
        });
        match self.options.expander {
            Expander::LeastCost => return holding.next().map(|g| (g, 0.0)),
            // Highest priority first; the first of equals in buying order.
            Expander::Priority => {
                return holding
                    .map(|g| (g, -f64::from(self.groups[g].spec.priority)))
                    .min_by(|a, b| a.1.total_cmp(&b.1));
            }
            Expander::LeastWaste => {}
        }
        let (extra_cpu, extra_memory) = extra.map_or((0, 0), Allocatable::cpu_memory);
        let unused = |g: usize| {
            let allocatable = allocatables.get(&g)?;
            let (cpu, memory) = allocatable.cpu_memory();
            let (room_cpu, room_memory, _) = self.snapshot.room_within(node_index, allocatable)?;
            let share = |left: i64, total: i64| {
                if total > 0 {
                    left as f64 / total as f64
                } else {
                    0.0
                }
            };
            Some(
                (share(room_cpu - extra_cpu, cpu) + share(room_memory - extra_memory, memory))
                    / 2.0,
            )
        };
        holding
            .filter_map(|g| unused(g).map(|w| (g, w)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// Fraction of a new node's CPU and memory left unused by what was placed.
pub(super) fn waste(group: &Group, requested: (i64, i64)) -> f64 {
    let allocatable = group.spec.template.effective_allocatable();
    let cpu = allocatable
        .get("cpu")
        .map_or(0, |q| dra_sim::quantity::milli_value(&q.0).unwrap_or(0));
    let mem = allocatable
        .get("memory")
        .map_or(0, |q| dra_sim::quantity::value(&q.0).unwrap_or(0));
    let frac = |used: i64, total: i64| {
        if total > 0 {
            1.0 - (used as f64 / total as f64).min(1.0)
        } else {
            0.0
        }
    };
    (frac(requested.0, cpu) + frac(requested.1, mem)) / 2.0
}
