//! `dra-autoscaler simulate`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use dra_plan::args::PlanArgs;
use dra_plan::gang_apis::GangApisFound;
use dra_plan::scaledown::ScaleDownReport;
use dra_plan::{PlanOptions, PlanReport};
use dra_sim::report::Report;
use dra_sim::{ClusterObjects, FeatureGates, KubeVersion};
use k8s_openapi::jiff::Timestamp;

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
    /// The scheduler modelled and the planner's choices (as `run` takes them).
    #[command(flatten)]
    pub plan: PlanArgs,

    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: OutputFormat,

    /// The time to plan at, for reservation end times: an RFC 3339 time
    /// (2026-12-01T00:00:00Z), or `none` to ignore end times (output that does
    /// not depend on the clock). Default: the current time.
    #[arg(long, env = "DRA_AUTOSCALER_NOW")]
    pub now: Option<String>,

    /// Snapshot files or directories (.yaml, .yml, .json; `kind: List` and
    /// multi-document YAML are fine).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

impl SimulateArgs {
    /// `--kubernetes-version`, or the newest release modelled.
    fn version(&self) -> KubeVersion {
        self.plan.kubernetes_version.unwrap_or(KubeVersion::NEWEST)
    }

    /// The gates these flags select: the version's defaults, then
    /// `--feature-gates`, with `--dra-filter-timeout`.
    ///
    /// # Errors
    /// A flag value that does not apply (clap checks them when parsed).
    pub fn gates(&self) -> anyhow::Result<FeatureGates> {
        self.plan
            .gates(self.version())
            .context("--feature-gates, --dra-filter-timeout")
    }

    /// The gates to plan `objects` with: the version's defaults, the gang gates
    /// the objects show the cluster runs (see [`dra_plan::gang_apis`]), then
    /// `--feature-gates`. Also returns the line saying which gang APIs were
    /// found and used, if any was found.
    ///
    /// # Errors
    /// A flag value that does not apply (clap checks them when parsed).
    pub fn planning_gates(
        &self,
        objects: &ClusterObjects,
    ) -> anyhow::Result<(FeatureGates, Option<String>)> {
        let found =
            GangApisFound::in_objects(&objects.extra, &objects.pods, &objects.pod_workload_refs);
        let resolved = self
            .plan
            .planning_gates(self.version(), &found)
            .context("--feature-gates, --dra-filter-timeout")?;
        Ok((resolved.gates, resolved.summary))
    }

    /// Planner options from the flags, planning at `clock` unless `--now`
    /// says otherwise.
    ///
    /// # Errors
    /// A `--now` that is neither an RFC 3339 time nor `none`.
    pub fn plan_options(&self, clock: Timestamp) -> anyhow::Result<PlanOptions> {
        let now = match self.now.as_deref().map(str::trim) {
            None => Some(clock),
            Some("none") => None,
            Some(time) => Some(time.parse::<Timestamp>().context(
                "--now: expected an RFC 3339 time such as 2026-12-01T00:00:00Z, or none",
            )?),
        };
        Ok(self.plan.plan_options(now))
    }

    /// Loads the snapshot and simulates (or plans, when NodeGroups are in the
    /// input, at the current time unless `--now` says otherwise), without
    /// printing. Returns the report and notes for stderr (skipped kinds, the
    /// gang APIs found).
    ///
    /// # Errors
    /// Bad flags or unreadable input.
    pub fn simulate(&self) -> anyhow::Result<(SimulateOutput, Vec<String>)> {
        let (output, notes, _) = self.simulate_leaving()?;
        Ok((output, notes))
    }

    /// [`Self::simulate`], also handing back what planning left (see
    /// [`dra_plan::simulate::Leftovers`]) for [`Self::run`] to leave to the process's end.
    fn simulate_leaving(
        &self,
    ) -> anyhow::Result<(
        SimulateOutput,
        Vec<String>,
        Option<dra_plan::simulate::Leftovers>,
    )> {
        // The CLI reads the clock; the planner only ever gets a time.
        let options = self.plan_options(Timestamp::now())?;
        let mut loader = dra_plan::simulate::loader();
        loader.type_on_threads(input::typing_threads());
        let loaded = input::load(&self.paths, loader)?;
        let mut notes: Vec<String> = [loaded.skipped_note(), loaded.duplicates_note()]
            .into_iter()
            .flatten()
            .chain(
                self.plan
                    .dropped_gates(self.version())
                    .iter()
                    .map(ToString::to_string),
            )
            .collect();
        // ProvisioningRequests and CapacityBuffers are planned too, on
        // existing capacity when there is no NodeGroup.
        let has_groups = loaded.objects.extra.iter().any(|o| {
            o.kind == "NodeGroup"
                || o.kind == dra_plan::provreq::KIND
                || o.kind == dra_plan::buffers::KIND
        });
        let mut left = None;
        let output = if has_groups {
            let (gates, gang_apis) = self.planning_gates(&loaded.objects)?;
            notes.extend(gang_apis);
            let (plan, scale_down, leftovers) =
                dra_plan::simulate::plan_and_scale_down_leaving(loaded.objects, gates, &options);
            left = Some(leftovers);
            SimulateOutput::Plan(Box::new(plan), scale_down)
        } else {
            SimulateOutput::Pods(dra_sim::simulate::simulate(loaded.objects, self.gates()?))
        };
        Ok((output, notes, left))
    }

    /// Runs the command: the report goes to stdout, notes to stderr. What planning left
    /// (the scale-down analysis' snapshot of the whole cluster) is not freed but left to the
    /// process's exit, so this is for a process that runs it once and ends, as the
    /// `simulate` command does; [`Self::simulate`] frees everything.
    ///
    /// # Errors
    /// Bad flags, unreadable input, or stdout closed.
    pub fn run(self) -> anyhow::Result<()> {
        let (report, notes, leftovers) = self.simulate_leaving()?;
        // The command prints the report and exits: the operating system takes the
        // cluster's objects back at once, faster than freeing them one by one (issue #28).
        std::mem::forget(leftovers);
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
