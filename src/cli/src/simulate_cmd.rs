//! `dra-autoscaler simulate`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use dra_sim::report::Report;
use dra_sim::{FeatureGates, KubeVersion, Loader};

use crate::input;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// The JSON report (a contract: keys are only ever added).
    Json,
    /// A readable table.
    Text,
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

    /// Loads the snapshot and simulates, without printing.
    ///
    /// # Errors
    /// Bad flags or unreadable input.
    pub fn simulate(&self) -> anyhow::Result<(Report, Option<String>)> {
        let gates = self.gates()?;
        let loaded = input::load(&self.paths, Loader::new())?;
        let note = loaded.skipped_note();
        Ok((dra_sim::simulate::simulate(loaded.objects, gates), note))
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
        let text = match self.output {
            OutputFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
            OutputFormat::Text => report.to_text(),
        };
        std::io::stdout()
            .lock()
            .write_all(text.as_bytes())
            .context("writing the report")?;
        Ok(())
    }
}
