//! What `dra-autoscaler simulate` does between reading files and printing: the loader
//! that keeps every kind the planner and the scale-down analysis read, and the plan with
//! the scale-down analysis after it. The command line and the end-to-end benchmark share
//! it, so the benchmark times what users run.

use dra_sim::{ClusterObjects, FeatureGates, Loader};

use crate::PlanOptions;
use crate::report::PlanReport;
use crate::scaledown::{ScaleDownOptions, ScaleDownReport};

/// A loader that types the simulator's kinds and keeps, untyped, every other kind the
/// planner reads: NodeGroups, DaemonSets, PodDisruptionBudgets, the gang APIs'
/// objects, ProvisioningRequests, CapacityBuffers and the templates they name. What
/// nothing reads of the objects is dropped as they load ([`dra_sim::trim`]).
#[must_use]
pub fn loader() -> Loader {
    let mut loader = Loader::new();
    loader.trim_unread();
    loader.keep_kind("dra-autoscaler.io", "NodeGroup");
    loader.keep_kind("apps", "DaemonSet");
    let (pdb_group, pdb_kind) = crate::scaledown::pdb::PDB_KIND;
    loader.keep_kind(pdb_group, pdb_kind);
    for (group, kind) in crate::gang::GANG_KINDS
        .iter()
        .chain(crate::templates::STAND_IN_KINDS)
    {
        loader.keep_kind(group, kind);
    }
    loader
}

/// The scale-up plan for `objects`, then what scale-down would remove after it. Offline
/// there is no history: every underused node counts as unneeded for long enough.
///
/// The same as [`crate::plan`] of a copy of `objects` followed by
/// [`crate::scaledown::analyse`] of `objects`, without the copy of the nodes and pods,
/// which are most of a large snapshot's memory: the planner hands them back
/// ([`crate::handback`]).
#[must_use]
pub fn plan_and_scale_down(
    objects: ClusterObjects,
    gates: FeatureGates,
    options: &PlanOptions,
) -> (PlanReport, ScaleDownReport) {
    let (plan, scale_down, _) = plan_and_scale_down_leaving(objects, gates, options);
    (plan, scale_down)
}

/// The state [`plan_and_scale_down_leaving`] leaves: the scale-down analysis' snapshot,
/// i.e. every node, pod and device of the cluster. Dropping it frees them one by one.
#[derive(Debug)]
pub struct Leftovers {
    _snapshot: dra_sim::snapshot::Snapshot,
}

/// [`plan_and_scale_down`], also handing back what the analysis leaves, for a caller that
/// decides when (or whether) to free it: freeing the 271,000 objects of a 100,000-node
/// cluster one allocation at a time took about 5 % of `simulate`'s time (issue #28),
/// which a process about to exit can leave to the operating system.
#[must_use]
pub fn plan_and_scale_down_leaving(
    objects: ClusterObjects,
    gates: FeatureGates,
    options: &PlanOptions,
) -> (PlanReport, ScaleDownReport, Leftovers) {
    let (plan, objects) = crate::handback::plan_handing_back(objects, gates, options);
    let (scale_down, snapshot) = crate::scaledown::analyse_keeping_snapshot(
        objects,
        gates,
        &plan,
        &ScaleDownOptions {
            now: options.now,
            ..ScaleDownOptions::default()
        },
    );
    (
        plan,
        scale_down,
        Leftovers {
            _snapshot: snapshot,
        },
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The plan and the scale-down analysis the simple way: a copy of everything planned,
    /// the original analysed.
    fn with_a_copy(
        objects: ClusterObjects,
        gates: FeatureGates,
        options: &PlanOptions,
    ) -> (PlanReport, ScaleDownReport) {
        let plan = crate::plan(objects.clone(), gates, options);
        let scale_down = crate::scaledown::analyse(
            objects,
            gates,
            &plan,
            &ScaleDownOptions {
                now: options.now,
                ..ScaleDownOptions::default()
            },
        );
        (plan, scale_down)
    }

    /// Every planner scenario and every simulate case of `testdata/`, loaded as
    /// `simulate` loads them.
    pub(crate) fn snapshots() -> Vec<(String, ClusterObjects)> {
        snapshots_in(&["scenarios", "simulate"])
    }

    /// The cases of `dirs` under `testdata/`, loaded.
    pub(crate) fn snapshots_in(dirs: &[&str]) -> Vec<(String, ClusterObjects)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
        let mut found = Vec::new();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            let mut cases: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
            cases.sort();
            for case in cases {
                let Ok(files) = std::fs::read_dir(&case) else {
                    continue;
                };
                let mut loader = loader();
                let mut any = false;
                let mut files: Vec<_> = files.filter_map(Result::ok).map(|e| e.path()).collect();
                files.sort();
                for file in files {
                    let Some(ext) = file.extension().and_then(|e| e.to_str()) else {
                        continue;
                    };
                    if file
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("expected"))
                    {
                        continue;
                    }
                    let text = std::fs::read_to_string(&file).unwrap();
                    let name = file.display().to_string();
                    let added = match ext {
                        "yaml" | "yml" => loader.add_yaml(&name, &text),
                        "json" => loader.add_json(&name, &text),
                        _ => continue,
                    };
                    any |= added.is_ok();
                }
                if any {
                    found.push((case.display().to_string(), loader.finish().objects));
                }
            }
        }
        found
    }

    #[test]
    fn handing_the_nodes_and_pods_back_plans_and_analyses_as_a_copy_does() {
        let cases = snapshots();
        assert!(cases.len() > 100, "testdata not found: {}", cases.len());
        let options = PlanOptions::default();
        let mut with_scale_downs = 0;
        for (case, objects) in cases {
            let gates = FeatureGates::default();
            let expected = with_a_copy(objects.clone(), gates, &options);
            let actual = plan_and_scale_down(objects, gates, &options);
            assert_eq!(
                serde_json::to_value(&actual).unwrap(),
                serde_json::to_value(&expected).unwrap(),
                "{case}"
            );
            with_scale_downs += usize::from(!expected.1.scale_downs.is_empty());
        }
        // The analysis had work to do in some of them.
        assert!(with_scale_downs > 3, "{with_scale_downs}");
    }
}
