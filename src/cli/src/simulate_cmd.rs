//! `dra-autoscaler simulate`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use dra_plan::gang_apis::GangApisFound;
use dra_plan::scaledown::{ScaleDownOptions, ScaleDownReport};
use dra_plan::{PlanOptions, PlanReport};
use dra_sim::report::Report;
use dra_sim::{ClusterObjects, FeatureGates, KubeVersion, Loader};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::input;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The JSON report (a contract: keys are only ever added).
    Json,
    /// A readable table.
    Text,
}

/// What `simulate` produced: a placement of pending pods on existing nodes,
/// or, when the input has NodeGroups, a scale-up plan and what scale-down
/// would remove.
#[derive(Debug, Clone)]
pub enum SimulateOutput {
    /// Pods placed on existing nodes only.
    Pods(Report),
    /// A plan over node groups, and the scale-down analysis after it.
    /// (Boxed: a plan is far larger than the other variant.)
    Plan(Box<PlanReport>, ScaleDownReport),
}

impl SimulateOutput {
    /// The report as JSON.
    ///
    /// # Errors
    /// Serialization failure (not expected).
    pub fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        match self {
            SimulateOutput::Pods(r) => serde_json::to_value(r),
            SimulateOutput::Plan(plan, scale_down) => plan_json(plan, scale_down),
        }
    }

    /// The report as `-o text` prints it.
    #[must_use]
    pub fn to_text(&self) -> String {
        match self {
            SimulateOutput::Pods(r) => r.to_text(),
            SimulateOutput::Plan(plan, scale_down) => plan.to_text() + &scale_down.to_text(),
        }
    }
}

/// The plan's JSON with the scale-down keys (`scaleDowns`, `scaleDownBlocked`) added.
fn plan_json(
    plan: &PlanReport,
    scale_down: &ScaleDownReport,
) -> serde_json::Result<serde_json::Value> {
    let mut value = serde_json::to_value(plan)?;
    if let (Some(map), serde_json::Value::Object(more)) =
        (value.as_object_mut(), serde_json::to_value(scale_down)?)
    {
        map.extend(more);
    }
    Ok(value)
}

/// Flags of `simulate`.
#[derive(Debug, Clone, Args)]
pub struct SimulateArgs {
    /// Kubernetes version of the cluster whose scheduler is modelled (1.34 to
    /// 1.37); sets the feature-gate defaults.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_KUBERNETES_VERSION",
        default_value = "1.37"
    )]
    pub kubernetes_version: String,

    /// The DynamicResources plugin's `filterTimeout`: how long kube-scheduler
    /// lets one pod's device allocation on one node run (with the
    /// `DRASchedulerFilterTimeout` gate, on since 1.34) before it reports the
    /// node as "timed out trying to allocate devices". Simulated as a work
    /// bound (1,000 search steps per millisecond); `0s` disables it.
    #[arg(long, env = "DRA_AUTOSCALER_DRA_FILTER_TIMEOUT", default_value = "10s")]
    pub dra_filter_timeout: SignedDuration,

    /// Feature gates on top of the version's defaults, as kube-scheduler takes
    /// them: `DRAPartitionableDevices=false,DRAListTypeAttributes=true`.
    /// Known gates: DRAAdminAccess, DRAPrioritizedList, DRAPartitionableDevices,
    /// DRADeviceTaints, DRADeviceTaintRules, DRADeviceBindingConditions,
    /// DRAResourceClaimDeviceStatus, DRAConsumableCapacity,
    /// DRAFractionalCapacityRange, DRAListTypeAttributes, DRAExtendedResource,
    /// DRADeviceCompatibilityGroups, DRAOptionalNodeOperations, GenericWorkload,
    /// GangScheduling, TopologyAwareWorkloadScheduling, DRASchedulerFilterTimeout. When
    /// planning, scheduling.k8s.io Workload/PodGroup objects or pods linked to
    /// them turn the gang gates on (GenericWorkload, GangScheduling,
    /// TopologyAwareWorkloadScheduling) unless this flag turns them off.
    #[arg(long, env = "DRA_AUTOSCALER_FEATURE_GATES", default_value = "")]
    pub feature_gates: String,

    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: OutputFormat,

    /// How to choose between node groups that can all take a gang, when the
    /// input has NodeGroups: least-cost, priority or least-waste.
    #[arg(long, env = "DRA_AUTOSCALER_EXPANDER", default_value = "least-cost")]
    pub expander: String,

    /// The time to plan at, for reservation end times: an RFC 3339 time
    /// (2026-12-01T00:00:00Z), or `none` to ignore end times (output that does
    /// not depend on the clock). Default: the current time.
    #[arg(long, env = "DRA_AUTOSCALER_NOW")]
    pub now: Option<String>,

    /// A reservation that ends sooner than this after `--now` is not used
    /// (e.g. 1h, 30m, 2h30m).
    #[arg(
        long,
        env = "DRA_AUTOSCALER_MIN_RESERVATION_LEFT",
        default_value = "1h"
    )]
    pub min_reservation_left: String,

    /// Snapshot files or directories (.yaml, .yml, .json; `kind: List` and
    /// multi-document YAML are fine).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

impl SimulateArgs {
    /// The gates these flags select.
    ///
    /// # Errors
    /// An unsupported version or a malformed/unknown gate.
    pub fn gates(&self) -> anyhow::Result<FeatureGates> {
        let mut gates = self.version_gates()?;
        gates
            .apply_flag(&self.feature_gates)
            .context("--feature-gates")?;
        gates
            .set_dra_filter_timeout(self.dra_filter_timeout)
            .context("--dra-filter-timeout")?;
        Ok(gates)
    }

    /// The defaults of `--kubernetes-version`, before `--feature-gates`.
    fn version_gates(&self) -> anyhow::Result<FeatureGates> {
        let version: KubeVersion = self
            .kubernetes_version
            .parse()
            .context("--kubernetes-version")?;
        Ok(FeatureGates::for_version(version))
    }

    /// The gates to plan `objects` with: the version's defaults, the gang gates
    /// the objects show the cluster runs (see [`dra_plan::gang_apis`]), then
    /// `--feature-gates`. Also returns the line saying which gang APIs were
    /// found and used, if any was found.
    ///
    /// # Errors
    /// An unsupported version or a malformed/unknown gate.
    pub fn planning_gates(
        &self,
        objects: &ClusterObjects,
    ) -> anyhow::Result<(FeatureGates, Option<String>)> {
        let found =
            GangApisFound::in_objects(&objects.extra, &objects.pods, &objects.pod_workload_refs);
        let resolved = found
            .resolve_gates(self.version_gates()?, &self.feature_gates)
            .context("--feature-gates")?;
        Ok((resolved.gates, resolved.summary))
    }

    /// Planner options from the flags, planning at `clock` unless `--now`
    /// says otherwise.
    ///
    /// # Errors
    /// An unknown expander, a bad time or duration.
    pub fn plan_options(&self, clock: Timestamp) -> anyhow::Result<PlanOptions> {
        let expander = self
            .expander
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))
            .context("--expander")?;
        let now = match self.now.as_deref().map(str::trim) {
            None => Some(clock),
            Some("none") => None,
            Some(time) => Some(time.parse::<Timestamp>().context(
                "--now: expected an RFC 3339 time such as 2026-12-01T00:00:00Z, or none",
            )?),
        };
        let min_reservation_left: SignedDuration = self
            .min_reservation_left
            .parse()
            .context("--min-reservation-left: expected a duration such as 1h or 30m")?;
        Ok(PlanOptions {
            expander,
            now,
            min_reservation_left,
        })
    }

    /// Loads the snapshot and simulates (or plans, when NodeGroups are in the
    /// input, at the current time unless `--now` says otherwise), without
    /// printing. Returns the report and notes for stderr (skipped kinds, the
    /// gang APIs found).
    ///
    /// # Errors
    /// Bad flags or unreadable input.
    pub fn simulate(&self) -> anyhow::Result<(SimulateOutput, Vec<String>)> {
        // The CLI reads the clock; the planner only ever gets a time.
        let options = self.plan_options(Timestamp::now())?;
        let mut loader = Loader::new();
        loader.keep_kind("dra-autoscaler.io", "NodeGroup");
        loader.keep_kind("apps", "DaemonSet");
        let (pdb_group, pdb_kind) = dra_plan::scaledown::pdb::PDB_KIND;
        loader.keep_kind(pdb_group, pdb_kind);
        for (group, kind) in dra_plan::gang::GANG_KINDS
            .iter()
            .chain(dra_plan::templates::STAND_IN_KINDS)
        {
            loader.keep_kind(group, kind);
        }
        let loaded = input::load(&self.paths, loader)?;
        let mut notes: Vec<String> = [loaded.skipped_note(), loaded.duplicates_note()]
            .into_iter()
            .flatten()
            .collect();
        // ProvisioningRequests and CapacityBuffers are planned too, on
        // existing capacity when there is no NodeGroup.
        let has_groups = loaded.objects.extra.iter().any(|o| {
            o.kind == "NodeGroup"
                || o.kind == dra_plan::provreq::KIND
                || o.kind == dra_plan::buffers::KIND
        });
        let output = if has_groups {
            let (gates, gang_apis) = self.planning_gates(&loaded.objects)?;
            notes.extend(gang_apis);
            let plan = dra_plan::plan(loaded.objects.clone(), gates, &options);
            // No history offline: every underused node counts as unneeded for long enough.
            let scale_down = dra_plan::scaledown::analyse(
                loaded.objects,
                gates,
                &plan,
                &ScaleDownOptions {
                    now: options.now,
                    ..ScaleDownOptions::default()
                },
            );
            SimulateOutput::Plan(Box::new(plan), scale_down)
        } else {
            SimulateOutput::Pods(dra_sim::simulate::simulate(loaded.objects, self.gates()?))
        };
        Ok((output, notes))
    }

    /// Runs the command: the report goes to stdout, notes to stderr.
    ///
    /// # Errors
    /// Bad flags, unreadable input, or stdout closed.
    pub fn run(self) -> anyhow::Result<()> {
        let (report, notes) = self.simulate()?;
        for note in notes {
            tracing::info!(note, "input");
            eprintln!("note: {note}");
        }
        let text = match (self.output, &report) {
            (OutputFormat::Json, SimulateOutput::Pods(r)) => {
                serde_json::to_string_pretty(r)? + "\n"
            }
            (OutputFormat::Json, SimulateOutput::Plan(plan, scale_down)) => {
                serde_json::to_string_pretty(&plan_json(plan, scale_down)?)? + "\n"
            }
            (OutputFormat::Text, report) => report.to_text(),
        };
        std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("writing the report")?;
        Ok(())
    }
}
