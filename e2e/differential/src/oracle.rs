//! The upstream side: one long-lived `oracle --serve` process (e2e/oracle,
//! kube-scheduler v1.37.2's framework in Go) that judges one cluster per
//! request line. Starting a Kubernetes-linked binary costs far more than a
//! small cluster, so a run keeps one process for all its clusters.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use dra_sim::report::PodReport;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why the oracle gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// The program could not be started.
    #[error("cannot start the oracle {path}: {source}")]
    Start {
        /// The program.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The pipe broke or the process ended.
    #[error("the oracle process failed: {0}")]
    Io(#[from] std::io::Error),
    /// A line that is not an answer.
    #[error("the oracle answered something unreadable: {0}")]
    Protocol(String),
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Request<'a> {
    id: String,
    kubernetes_version: &'a str,
    feature_gates: &'a str,
    snapshot: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    defaults: bool,
}

/// What kube-scheduler did with a cluster.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Answer {
    /// The request's id.
    #[serde(default)]
    pub id: String,
    /// The gate the scheduler ran with (requested and emulated version,
    /// values of its DRA gates).
    #[serde(default)]
    pub gates: Option<Value>,
    /// Every pending pod, in placement order.
    #[serde(default)]
    pub pods: Vec<PodReport>,
    /// Gate defaults, for a defaults request.
    #[serde(default)]
    pub defaults: Option<BTreeMap<String, bool>>,
    /// The cluster could not be judged (not a pod outcome).
    #[serde(default)]
    pub error: Option<String>,
}

/// A running `oracle --serve`.
#[derive(Debug)]
pub struct Oracle {
    child: Child,
    input: BufWriter<ChildStdin>,
    output: BufReader<ChildStdout>,
    next_id: u64,
}

impl Oracle {
    /// Starts `program --serve`.
    ///
    /// # Errors
    /// The program cannot be started.
    pub fn start(program: &Path) -> Result<Self, OracleError> {
        let start_error = |source| OracleError::Start {
            path: program.to_path_buf(),
            source,
        };
        let mut child = Command::new(program)
            .arg("--serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(start_error)?;
        let missing = || start_error(std::io::Error::other("no pipe"));
        let input = BufWriter::new(child.stdin.take().ok_or_else(missing)?);
        let output = BufReader::new(child.stdout.take().ok_or_else(missing)?);
        Ok(Self {
            child,
            input,
            output,
            next_id: 0,
        })
    }

    fn send(&mut self, request: &Request<'_>) -> Result<(), OracleError> {
        let line =
            serde_json::to_string(request).map_err(|e| OracleError::Protocol(e.to_string()))?;
        self.input.write_all(line.as_bytes())?;
        self.input.write_all(b"\n")?;
        self.input.flush()?;
        Ok(())
    }

    fn receive(&mut self, id: &str) -> Result<Answer, OracleError> {
        let mut reply = String::new();
        if self.output.read_line(&mut reply)? == 0 {
            return Err(OracleError::Io(std::io::Error::other(
                "the oracle closed its output",
            )));
        }
        let answer: Answer = serde_json::from_str(&reply)
            .map_err(|e| OracleError::Protocol(format!("{e}: {}", reply.trim())))?;
        if answer.id != id {
            return Err(OracleError::Protocol(format!(
                "answer {} to request {id}",
                answer.id
            )));
        }
        Ok(answer)
    }

    fn ask(&mut self, request: &Request<'_>) -> Result<Answer, OracleError> {
        self.send(request)?;
        self.receive(&request.id)
    }

    /// Sends one cluster to judge (`snapshot` is YAML or JSON text as
    /// `simulate` reads it) and returns a ticket for [`Oracle::answer`];
    /// the caller may work meanwhile (the oracle is another process).
    ///
    /// # Errors
    /// The process failed.
    pub fn submit(
        &mut self,
        kubernetes_version: &str,
        feature_gates: &str,
        snapshot: &str,
    ) -> Result<String, OracleError> {
        self.next_id += 1;
        let id = self.next_id.to_string();
        self.send(&Request {
            id: id.clone(),
            kubernetes_version,
            feature_gates,
            snapshot,
            defaults: false,
        })?;
        Ok(id)
    }

    /// The answer to a [`Oracle::submit`]ted cluster (answers come in order).
    ///
    /// # Errors
    /// The process failed or answered something unreadable.
    pub fn answer(&mut self, ticket: &str) -> Result<Answer, OracleError> {
        self.receive(ticket)
    }

    /// Judges one cluster.
    ///
    /// # Errors
    /// The process failed or answered something unreadable.
    pub fn judge(
        &mut self,
        kubernetes_version: &str,
        feature_gates: &str,
        snapshot: &str,
    ) -> Result<Answer, OracleError> {
        let ticket = self.submit(kubernetes_version, feature_gates, snapshot)?;
        self.answer(&ticket)
    }

    /// The DRA gate defaults of a version, as kube-scheduler v1.37.2
    /// emulating it has them.
    ///
    /// # Errors
    /// The process failed, answered something unreadable, or refused.
    pub fn defaults(
        &mut self,
        kubernetes_version: &str,
    ) -> Result<BTreeMap<String, bool>, OracleError> {
        self.next_id += 1;
        let answer = self.ask(&Request {
            id: self.next_id.to_string(),
            kubernetes_version,
            feature_gates: "",
            snapshot: "",
            defaults: true,
        })?;
        if let Some(error) = answer.error {
            return Err(OracleError::Protocol(error));
        }
        Ok(answer.defaults.unwrap_or_default())
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        // Closing stdin ends the serve loop; wait so no zombie is left.
        let _ = self.input.flush();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
