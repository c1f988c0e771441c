//! `dra-autoscaler simulate`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use dra_controller::PlanArgs;
use dra_plan::{PlanOptions, PlanReport};
use dra_sim::report::Report;
use dra_sim::{FeatureGates, KubeVersion, Loader};
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
/// or, when the input has NodeGroups, a scale-up plan.
#[derive(Debug, Clone)]
pub enum SimulateOutput {
    /// Pods placed on existing nodes only.
    Pods(Report),
    /// A plan over node groups.
    Plan(PlanReport),
}

impl SimulateOutput {
    /// The report as JSON.
    ///
    /// # Errors
    /// Serialization failure (not expected).
    pub fn to_json(&self) -> serde_json::Result<serde_json::Value> {
        match self {
            SimulateOutput::Pods(r) => serde_json::to_value(r),
            SimulateOutput::Plan(r) => serde_json::to_value(r),
        }
    }
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

    /// The time to plan at (RFC 3339), for reservation end times. Without it,
    /// end times are ignored (a simulation reads no clock).
    #[arg(long, env = "DRA_AUTOSCALER_NOW")]
    pub now: Option<String>,

    /// Snapshot files or directories (.yaml, .yml, .json; `kind: List` and
    /// multi-document YAML are fine).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

impl SimulateArgs {
    /// The gates these flags select: `--kubernetes-version`'s (default the
    /// newest modelled), then `--feature-gates`.
    ///
    /// # Errors
    /// A gate list that does not apply (clap checks it when parsed).
    pub fn gates(&self) -> anyhow::Result<FeatureGates> {
        let version = self.plan.kubernetes_version.unwrap_or(KubeVersion::NEWEST);
        self.plan.gates(version).context("--feature-gates")
    }

    /// Planner options from the flags.
    ///
    /// # Errors
    /// A `--now` that is not an RFC 3339 time.
    pub fn plan_options(&self) -> anyhow::Result<PlanOptions> {
        let now = self
            .now
            .as_deref()
            .map(str::parse::<Timestamp>)
            .transpose()
            .context("--now: expected an RFC 3339 time such as 2026-12-01T00:00:00Z")?;
        Ok(self.plan.plan_options(now))
    }

    /// Loads the snapshot and simulates (or plans, when NodeGroups are in the
    /// input), without printing. Returns the report and a note on skipped kinds.
    ///
    /// # Errors
    /// Bad flags or unreadable input.
    pub fn simulate(&self) -> anyhow::Result<(SimulateOutput, Option<String>)> {
        let gates = self.gates()?;
        let options = self.plan_options()?;
        let mut loader = Loader::new();
        loader.keep_kind("dra-autoscaler.io", "NodeGroup");
        loader.keep_kind("apps", "DaemonSet");
        for (group, kind) in dra_plan::gang::GANG_KINDS {
            loader.keep_kind(group, kind);
        }
        let loaded = input::load(&self.paths, loader)?;
        let note = loaded.skipped_note();
        let has_groups = loaded.objects.extra.iter().any(|o| o.kind == "NodeGroup");
        let output = if has_groups {
            SimulateOutput::Plan(dra_plan::plan(loaded.objects, gates, &options))
        } else {
            SimulateOutput::Pods(dra_sim::simulate::simulate(loaded.objects, gates))
        };
        Ok((output, note))
    }

    /// Runs the command: the report goes to stdout, notes to stderr.
    ///
    /// # Errors
    /// Bad flags, unreadable input, or stdout closed.
    pub fn run(self) -> anyhow::Result<()> {
        let (report, note) = self.simulate()?;
        if let Some(note) = note {
            tracing::info!(note, "input");
            eprintln!("note: {note}");
        }
        let text = match (self.output, &report) {
            (OutputFormat::Json, SimulateOutput::Pods(r)) => {
                serde_json::to_string_pretty(r)? + "\n"
            }
            (OutputFormat::Json, SimulateOutput::Plan(r)) => {
                serde_json::to_string_pretty(r)? + "\n"
            }
            (OutputFormat::Text, SimulateOutput::Pods(r)) => r.to_text(),
            (OutputFormat::Text, SimulateOutput::Plan(r)) => r.to_text(),
        };
        std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("writing the report")?;
        Ok(())
    }
}
