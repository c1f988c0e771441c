//! `dra-autoscaler simulate`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use dra_plan::{PlanOptions, PlanReport};
use dra_sim::report::Report;
use dra_sim::{FeatureGates, KubeVersion, Loader};
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
    /// Kubernetes version of the cluster whose scheduler is modelled (1.34 to
    /// 1.37); sets the feature-gate defaults.
    #[arg(
        long,
        env = "DRA_AUTOSCALER_KUBERNETES_VERSION",
        default_value = "1.37"
    )]
    pub kubernetes_version: String,

    /// Feature gates on top of the version's defaults, as kube-scheduler takes
    /// them: `DRAPartitionableDevices=false,DRAListTypeAttributes=true`.
    #[arg(long, env = "DRA_AUTOSCALER_FEATURE_GATES", default_value = "")]
    pub feature_gates: String,

    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value = "text")]
    pub output: OutputFormat,

    /// How to choose between node groups that can all take a gang, when the
    /// input has NodeGroups: least-cost, priority or least-waste.
    #[arg(long, env = "DRA_AUTOSCALER_EXPANDER", default_value = "least-cost")]
    pub expander: String,

    /// The time to plan at (RFC 3339), for reservation end times. Without it,
    /// end times are ignored (a simulation reads no clock).
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
        let version: KubeVersion = self
            .kubernetes_version
            .parse()
            .context("--kubernetes-version")?;
        let mut gates = FeatureGates::for_version(version);
        gates
            .apply_flag(&self.feature_gates)
            .context("--feature-gates")?;
        Ok(gates)
    }

    /// Planner options from the flags.
    ///
    /// # Errors
    /// An unknown expander, a bad time or duration.
    pub fn plan_options(&self) -> anyhow::Result<PlanOptions> {
        let expander = self
            .expander
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))
            .context("--expander")?;
        let now = self
            .now
            .as_deref()
            .map(str::parse::<Timestamp>)
            .transpose()
            .context("--now: expected an RFC 3339 time such as 2026-12-01T00:00:00Z")?;
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
        for (group, kind) in dra_plan::gang::GANG_KINDS
            .iter()
            .chain(dra_plan::templates::STAND_IN_KINDS)
        {
            loader.keep_kind(group, kind);
        }
        let loaded = input::load(&self.paths, loader)?;
        let note = loaded.skipped_note();
        // ProvisioningRequests and CapacityBuffers are planned too, on
        // existing capacity when there is no NodeGroup.
        let has_groups = loaded.objects.extra.iter().any(|o| {
            o.kind == "NodeGroup"
                || o.kind == dra_plan::provreq::KIND
                || o.kind == dra_plan::buffers::KIND
        });
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
