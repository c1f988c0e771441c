//! What the benchmark reads back: the fake provider's call log, the controller's loop log,
//! a process's memory and CPU time from `/proc`, and quantiles.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

/// One scale-up the fake provider accepted.
#[derive(Debug, Clone, Copy)]
pub struct Bought {
    /// When the provider logged it.
    pub at: Timestamp,
    /// Machines bought.
    pub count: usize,
}

/// The log lines of a `--log-format json` log, parsed; lines that are not JSON are skipped.
fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn timestamp(line: &Value) -> Option<Timestamp> {
    line.get("timestamp")?.as_str()?.parse().ok()
}

/// The number after `key=` in the fake provider's `args` field (`delta=8`, `count=8 minCount=8`).
fn arg(args: &str, key: &str) -> Option<usize> {
    args.split_whitespace()
        .find_map(|a| a.strip_prefix(key)?.strip_prefix('='))?
        .parse()
        .ok()
}

/// Successful `NodeGroupIncreaseSize` and `AtomicIncreaseSize` calls of the fake provider,
/// in log order.
pub fn scale_ups(provider_log: &Path) -> Vec<Bought> {
    json_lines(provider_log)
        .iter()
        .filter_map(|line| {
            let fields = line.get("fields")?;
            if fields.get("message")?.as_str()? != "provider call succeeded" {
                return None;
            }
            let args = fields.get("args")?.as_str()?;
            let count = match fields.get("call")?.as_str()? {
                "NodeGroupIncreaseSize" => arg(args, "delta")?,
                "AtomicIncreaseSize" => arg(args, "count")?,
                _ => return None,
            };
            Some(Bought {
                at: timestamp(line)?,
                count,
            })
        })
        .collect()
}

/// The steps of a loop its `loop finished` line times, in milliseconds (absent in the
/// lines of a controller built before they were added).
pub const PHASES: [&str; 9] = [
    "reconcile_ms",
    "view_ms",
    "plan_ms",
    "scale_ups_ms",
    "notices_ms",
    "scale_down_analysis_ms",
    "scale_down_writes_ms",
    "hand_back_ms",
    "read_stores_ms",
];

/// One finished loop of the controller (its `loop finished` debug line).
#[derive(Debug, Clone, Copy)]
pub struct Loop {
    /// When it finished.
    pub at: Timestamp,
    /// How long it took.
    pub took: Duration,
    /// Pending pods it planned for.
    pub planned_for: u64,
    /// Milliseconds per step, in the order of [`PHASES`].
    pub phases: Option<[u64; 9]>,
}

/// The controller's loops, in log order.
pub fn loops(controller_log: &Path) -> Vec<Loop> {
    json_lines(controller_log)
        .iter()
        .filter_map(|line| {
            let fields = line.get("fields")?;
            if fields.get("message")?.as_str()? != "loop finished" {
                return None;
            }
            Some(Loop {
                at: timestamp(line)?,
                took: Duration::from_secs_f64(fields.get("seconds")?.as_f64()?),
                planned_for: fields.get("planned_for")?.as_u64()?,
                phases: phases(fields),
            })
        })
        .collect()
}

fn phases(fields: &Value) -> Option<[u64; 9]> {
    let mut out = [0; 9];
    for (slot, name) in out.iter_mut().zip(PHASES) {
        *slot = fields.get(name)?.as_u64()?;
    }
    Some(out)
}

/// The time each gang (in the order they became complete; one machine each) waited for the
/// scale-up that bought its machine: gang `k` is served by the first accepted call that
/// brings the machines bought since `since` to `k + 1`. The controller plans every complete
/// gang each loop, so the gangs served first are the ones completed first.
pub fn gang_latencies(
    completed: &[Timestamp],
    bought: &[Bought],
    since: Timestamp,
) -> Vec<Duration> {
    let mut served_at = Vec::new();
    for call in bought.iter().filter(|b| b.at >= since) {
        served_at.extend(std::iter::repeat_n(call.at, call.count));
    }
    completed
        .iter()
        .zip(served_at)
        .map(|(done, at)| {
            let span = at.duration_since(*done);
            Duration::try_from(span).unwrap_or(Duration::ZERO)
        })
        .collect()
}

/// The `q` quantile (0..=1, nearest rank) of `values`, or zero when there are none.
pub fn quantile(values: &[Duration], q: f64) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Memory and CPU time of one process, from `/proc/PID/{status,stat}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Resident set size now, in KiB.
    pub rss_kib: u64,
    /// Peak resident set size (`VmHWM`), in KiB.
    pub peak_kib: u64,
    /// User plus system CPU time.
    pub cpu: Duration,
}

/// The usage of process `pid`, or `None` once it is gone.
pub fn usage(pid: u32) -> Option<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at the state, field 3:
    // utime and stime are fields 14 and 15, in clock ticks (100 per second on Linux).
    let after = stat.rsplit_once(')')?.1;
    let ticks: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|t| t.parse().ok())
        .collect();
    let cpu = Duration::from_millis(ticks.iter().sum::<u64>() * 10);
    Some(Usage {
        rss_kib: field("VmRSS:"),
        peak_kib: field("VmHWM:"),
        cpu,
    })
}

/// A plain HTTP/1.0 GET on `addr` (the controller's health listener): the status code and body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await?;
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((code, body))
}
