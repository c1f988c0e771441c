//! Supervision of `dra-local-stack up`'s processes, one at a time, for fault drills: a process
//! that dies is reported (with the last lines of its log) and the others keep running; from
//! another terminal, `dra-local-stack stop|start|restart NAME` stops, starts or restarts one
//! process with the arguments it was first started with, and `dra-local-stack status` lists
//! them. `kill -9 $(cat <dir>/pids/autoscaler.pid)` is the controller crash of a drill.
//!
//! The commands reach `up` through files: `<dir>/control/<action>-<name>` is a request, which
//! `up` carries out within half a second and then removes; `<dir>/pids/<name>.pid` holds each
//! running process's id (removed when it stops).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::processes::{Layout, Process, Spec, respawn, stop_process, tail};

/// The processes of the stack, by the names commands take (`controller` is `dra-autoscaler
/// run`, whose log is `autoscaler.log`).
pub const NAMES: &[&str] = &["apiserver", "provider", "scheduler", "controller"];

/// What a command asks of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Stop it (SIGINT, then SIGKILL after 5 s) and leave it stopped.
    Stop,
    /// Start it again (when it is not running).
    Start,
    /// Stop it and start it again.
    Restart,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Stop => "stop",
            Action::Start => "start",
            Action::Restart => "restart",
        }
    }
}

/// The process name a command's `name` stands for (`controller` and `autoscaler` are one).
///
/// # Errors
/// An unknown name.
pub fn process_name(name: &str) -> anyhow::Result<&'static str> {
    match name {
        "apiserver" => Ok("apiserver"),
        "provider" => Ok("provider"),
        "scheduler" => Ok("scheduler"),
        "controller" | "autoscaler" => Ok("autoscaler"),
        other => bail!(
            "no process {other:?} in the stack: one of {}",
            NAMES.join(", ")
        ),
    }
}

fn control_dir(dir: &Path) -> PathBuf {
    dir.join("control")
}

fn pid_file(dir: &Path, name: &str) -> PathBuf {
    dir.join("pids").join(format!("{name}.pid"))
}

/// Records `process`'s pid for `status` and for `kill`.
pub(crate) fn record_pid(dir: &Path, process: &Process) {
    let path = pid_file(dir, process.name);
    if let Some(pid) = process.child.id() {
        let _ = std::fs::create_dir_all(dir.join("pids"));
        let _ = std::fs::write(&path, format!("{pid}\n"));
    }
}

fn forget_pid(dir: &Path, name: &str) {
    let _ = std::fs::remove_file(pid_file(dir, name));
}

/// Asks the running `up` in `dir` to carry out `action` on `name`, and waits until it has.
///
/// # Errors
/// An unknown name, no `up` running there, or no answer within 20 s.
pub async fn request(dir: &Path, action: Action, name: &str) -> anyhow::Result<()> {
    let process = process_name(name)?;
    let control = control_dir(dir);
    if !control.is_dir() {
        bail!(
            "no local stack runs in {}: start one with `dra-local-stack up` (or e2e/local/run.sh)",
            dir.display()
        );
    }
    let file = control.join(format!("{}-{process}", action.as_str()));
    std::fs::write(&file, b"").with_context(|| format!("writing {}", file.display()))?;
    for _ in 0..200 {
        if !file.exists() {
            println!("{}", status_line(dir, process));
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = std::fs::remove_file(&file);
    bail!(
        "the stack in {} did not answer within 20 s: is `dra-local-stack up` still running?",
        dir.display()
    )
}

fn status_line(dir: &Path, process: &str) -> String {
    let pid = std::fs::read_to_string(pid_file(dir, process))
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok());
    match pid {
        Some(pid) if Path::new(&format!("/proc/{pid}")).exists() => {
            format!("{process}: running, pid {pid}")
        }
        Some(pid) => format!("{process}: not running (pid {pid} is gone)"),
        None => format!("{process}: not running"),
    }
}

/// Prints one line per process of the stack in `dir`.
pub fn status(dir: &Path) {
    for name in NAMES {
        if let Ok(process) = process_name(name) {
            println!("{}", status_line(dir, process));
        }
    }
}

/// One supervised slot: the process when it runs.
struct Slot {
    name: &'static str,
    running: Option<Process>,
    /// How it was first started, to start it again.
    template: Spec,
}

/// Runs until Ctrl-C: reports a process that dies and leaves the others running, and carries
/// out the requests of [`request`]. Stops every process, last started first, at the end.
///
/// # Errors
/// The control directory cannot be made.
pub(crate) async fn run(layout: &Layout, processes: Vec<Process>) -> anyhow::Result<()> {
    let control = control_dir(&layout.dir);
    std::fs::create_dir_all(&control).with_context(|| format!("creating {}", control.display()))?;
    let mut slots: Vec<Slot> = processes
        .into_iter()
        .map(|p| {
            record_pid(&layout.dir, &p);
            Slot {
                name: p.name,
                template: p.spec.clone(),
                running: Some(p),
            }
        })
        .collect();
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        for slot in &mut slots {
            let Some(process) = slot.running.as_mut() else {
                continue;
            };
            if let Ok(Some(status)) = process.child.try_wait() {
                eprintln!(
                    "{name} exited ({status}); the others keep running. `dra-local-stack start {command}` starts it again. Last lines of its log:\n{log}",
                    name = slot.name,
                    command = if slot.name == "autoscaler" {
                        "controller"
                    } else {
                        slot.name
                    },
                    log = tail(&layout.log(slot.name), 20)
                );
                slot.running = None;
                forget_pid(&layout.dir, slot.name);
            }
        }
        for slot in &mut slots {
            for action in [Action::Stop, Action::Start, Action::Restart] {
                let file = control.join(format!("{}-{}", action.as_str(), slot.name));
                if !file.exists() {
                    continue;
                }
                carry_out(layout, slot, action).await;
                let _ = std::fs::remove_file(&file);
            }
        }
    }
    for slot in slots.iter_mut().rev() {
        if let Some(mut process) = slot.running.take() {
            stop_process(&mut process).await;
        }
        forget_pid(&layout.dir, slot.name);
    }
    let _ = std::fs::remove_dir_all(&control);
    Ok(())
}

async fn carry_out(layout: &Layout, slot: &mut Slot, action: Action) {
    if matches!(action, Action::Stop | Action::Restart)
        && let Some(mut process) = slot.running.take()
    {
        stop_process(&mut process).await;
        forget_pid(&layout.dir, slot.name);
    }
    if matches!(action, Action::Start | Action::Restart) && slot.running.is_none() {
        match respawn(layout, &slot.template) {
            Ok(process) => {
                record_pid(&layout.dir, &process);
                eprintln!("{} started (pid {:?})", slot.name, process.child.id());
                slot.running = Some(process);
            }
            Err(error) => eprintln!("{} could not start: {error:#}", slot.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_name_the_controller_either_way_and_refuse_unknown_processes() {
        assert_eq!(process_name("controller").unwrap_or_default(), "autoscaler");
        assert_eq!(process_name("autoscaler").unwrap_or_default(), "autoscaler");
        assert_eq!(process_name("provider").unwrap_or_default(), "provider");
        let error = process_name("kubelet").map(|_| ()).unwrap_err().to_string();
        assert!(
            error.contains("apiserver, provider, scheduler, controller"),
            "{error}"
        );
    }
}
