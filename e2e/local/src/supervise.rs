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

use crate::process::{Layout, Process, Spec, respawn, stop_process, tail};

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

/// Runs until `shutdown` (Ctrl-C for `up`): reports a process that dies and leaves the others
/// running, and carries out the requests of [`request`]. Stops every process, last started
/// first, at the end.
///
/// # Errors
/// The control directory cannot be made.
pub(crate) async fn run(
    layout: &Layout,
    processes: Vec<Process>,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
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
            () = &mut shutdown => break,
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
        refuse_others(&control, &slots);
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

/// Answers requests for processes this stack does not run (the API server and scheduler of
/// `up --real` are the real control plane's): says so and drops them.
fn refuse_others(control: &Path, slots: &[Slot]) {
    let Ok(entries) = std::fs::read_dir(control) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let ours = slots.iter().any(|slot| {
            [Action::Stop, Action::Start, Action::Restart]
                .iter()
                .any(|action| file == format!("{}-{}", action.as_str(), slot.name))
        });
        if !ours {
            eprintln!(
                "request {file:?} ignored: this stack runs only {}",
                slots.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
            );
            let _ = std::fs::remove_file(entry.path());
        }
    }
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
    use crate::process::spawn;

    /// A stack whose four "binaries" are shell scripts that sleep, in a fresh directory.
    fn fake_stack(name: &str) -> Layout {
        let dir =
            std::env::temp_dir().join(format!("dra-local-stack-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap_or_default();
        std::fs::create_dir_all(dir.join("logs")).unwrap_or_default();
        for binary in [
            "dra-fake-apiserver",
            "dra-provider-fake",
            "dra-fake-scheduler",
            "dra-autoscaler",
        ] {
            let path = bin.join(binary);
            std::fs::write(&path, "#!/bin/sh\necho started \"$@\"\nexec sleep 600\n")
                .unwrap_or_default();
            let _ = std::process::Command::new("chmod")
                .arg("+x")
                .arg(&path)
                .status();
        }
        Layout {
            dir,
            bin,
            api_port: 0,
            provider: "127.0.0.1:0"
                .parse()
                .unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
            autoscaler_health: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            scan_interval: "1s".into(),
            log_format: "text".into(),
            controller_args: Vec::new(),
            provider_config: None,
            real: false,
        }
    }

    fn pid(dir: &Path, name: &str) -> Option<u32> {
        std::fs::read_to_string(pid_file(dir, name))
            .ok()
            .and_then(|p| p.trim().parse().ok())
    }

    fn alive(pid: Option<u32>) -> bool {
        pid.is_some_and(|p| Path::new(&format!("/proc/{p}")).exists())
    }

    async fn eventually(what: &str, check: impl Fn() -> bool) {
        for _ in 0..100 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what}: not within 10 s");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_process_dies_or_restarts_and_the_others_keep_running() {
        let layout = fake_stack("supervise");
        let dir = layout.dir.clone();
        let processes = vec![
            spawn(&layout, "apiserver", "dra-fake-apiserver", &[]).unwrap(),
            spawn(&layout, "provider", "dra-provider-fake", &[]).unwrap(),
            spawn(&layout, "scheduler", "dra-fake-scheduler", &[]).unwrap(),
            spawn(&layout, "autoscaler", "dra-autoscaler", &["run".into()]).unwrap(),
        ];
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let supervisor = {
            let layout = layout.clone();
            tokio::spawn(async move {
                run(&layout, processes, async {
                    let _ = stopped.await;
                })
                .await
            })
        };
        eventually("every pid recorded", || {
            ["apiserver", "provider", "scheduler", "autoscaler"]
                .iter()
                .all(|n| alive(pid(&dir, n)))
        })
        .await;
        let before: Vec<Option<u32>> = ["apiserver", "provider", "scheduler"]
            .iter()
            .map(|n| pid(&dir, n))
            .collect();

        // The controller crashes (kill -9): reported, the others keep running.
        let controller = pid(&dir, "autoscaler");
        let _ = std::process::Command::new("kill")
            .args(["-9", &controller.unwrap_or_default().to_string()])
            .status();
        eventually("the dead controller's pid forgotten", || {
            pid(&dir, "autoscaler").is_none()
        })
        .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        for (name, was) in ["apiserver", "provider", "scheduler"].iter().zip(&before) {
            assert_eq!(&pid(&dir, name), was, "{name} untouched");
            assert!(alive(*was), "{name} still running");
        }

        // Started again alone, with its first arguments.
        request(&dir, Action::Start, "controller").await.unwrap();
        let restarted = pid(&dir, "autoscaler");
        assert!(alive(restarted) && restarted != controller, "{restarted:?}");
        let log = std::fs::read_to_string(layout.log("autoscaler")).unwrap_or_default();
        assert_eq!(log.matches("started run").count(), 2, "{log}");

        // The provider restarted: a new process, the others as they were.
        request(&dir, Action::Restart, "provider").await.unwrap();
        let provider = pid(&dir, "provider");
        assert!(alive(provider) && provider != before[1], "{provider:?}");
        assert!(!alive(before[1]), "the old provider stopped");
        assert_eq!(pid(&dir, "apiserver"), before[0]);
        assert_eq!(pid(&dir, "autoscaler"), restarted);

        // Stopped alone, then everything at the end.
        request(&dir, Action::Stop, "scheduler").await.unwrap();
        assert!(!alive(before[2]) && pid(&dir, "scheduler").is_none());
        assert!(alive(pid(&dir, "apiserver")));
        let _ = stop.send(());
        supervisor.await.unwrap().unwrap();
        assert!(!alive(before[0]) && !alive(provider) && !alive(restarted));
        let _ = std::fs::remove_dir_all(&dir);
    }

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
