//! The `dra-fake-apiserver` binary: starts, prints its URL, writes a kubeconfig that
//! kube can use, serves /version and the CRDs given on the command line.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
};

use kube::{
    Client, Config, Discovery,
    api::GroupVersionKind,
    config::{KubeConfigOptions, Kubeconfig},
};

/// Kills the child process (by its own handle) when the test ends, pass or fail.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn binary_serves_version_and_writes_a_kubeconfig() {
    let kubeconfig_path = std::env::temp_dir().join(format!(
        "dra-fake-apiserver-{}.kubeconfig",
        std::process::id()
    ));
    let mut child = Running(
        Command::new(env!("CARGO_BIN_EXE_dra-fake-apiserver"))
            .args(["--port", "0", "--kube-version", "1.35.2"])
            .args([
                "--crd",
                "dra-autoscaler.io/v1alpha1/nodegroups/NodeGroup/Cluster",
            ])
            .arg("--kubeconfig-out")
            .arg(&kubeconfig_path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("binary starts"),
    );
    let stdout = child.0.stdout.take().expect("stdout piped");
    let url = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("reads the URL line");
        line.trim().to_owned()
    })
    .await
    .expect("reader joins");
    assert!(url.starts_with("http://127.0.0.1:"), "printed URL: {url:?}");

    let yaml = std::fs::read_to_string(&kubeconfig_path).expect("kubeconfig written");
    let _ = std::fs::remove_file(&kubeconfig_path);
    let kubeconfig = Kubeconfig::from_yaml(&yaml).expect("kube parses the kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config from kubeconfig");
    assert_eq!(config.cluster_url.to_string().trim_end_matches('/'), url);
    let client = Client::try_from(config).expect("client");

    let version = client.apiserver_version().await.expect("/version");
    assert_eq!(version.git_version, "v1.35.2");
    let discovery = Discovery::new(client).run().await.expect("discovery");
    let gvk = GroupVersionKind::gvk("dra-autoscaler.io", "v1alpha1", "NodeGroup");
    let (_, caps) = discovery.resolve_gvk(&gvk).expect("--crd is served");
    assert!(
        caps.subresources
            .iter()
            .any(|(sub, _)| sub.plural == "status"),
        "a --crd gets a status subresource by default"
    );
}

#[test]
fn the_binary_answers_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_dra-fake-apiserver"))
        .arg("--help")
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: dra-fake-apiserver"));
}
