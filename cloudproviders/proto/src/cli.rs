//! Command-line plumbing every provider binary shares: the `serve` flags (each binary names
//! their environment twins with its own prefix), `--log-format`, the cloud binaries'
//! subcommands, serving until Ctrl-C, and the `NodeGroup` YAML that `print-nodegroups` writes.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::logging::LogFormat;
use crate::provider::CloudProvider;
use crate::server::{ServeError, ServeOptions, ServerTls, serve};

/// The flags of serving a provider over gRPC.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to serve gRPC on.
    #[arg(long, default_value = "0.0.0.0:8086")]
    pub listen: SocketAddr,
    /// Server certificate (PEM); enables TLS.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Server key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA for client certificates (PEM); enables mTLS.
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Also fill the fields cluster-autoscaler <= 1.34 reads.
    #[arg(long)]
    pub legacy_fields: bool,
}

/// The flags of [`ServeArgs`] with their environment variables, `<prefix>_<FLAG>`.
const FLAGS: [(&str, &str); 5] = [
    ("listen", "LISTEN"),
    ("tls_cert", "TLS_CERT"),
    ("tls_key", "TLS_KEY"),
    ("tls_client_ca", "TLS_CLIENT_CA"),
    ("legacy_fields", "LEGACY_FIELDS"),
];

impl ServeArgs {
    /// `command` (which flattens [`ServeArgs`]) with the flags' environment variables named
    /// `<env_prefix>_LISTEN`, `<env_prefix>_TLS_CERT`, `<env_prefix>_TLS_KEY`,
    /// `<env_prefix>_TLS_CLIENT_CA` and `<env_prefix>_LEGACY_FIELDS`, and `--listen`
    /// defaulting to `default_listen`. The variables are part of each binary's interface (the
    /// Helm charts set them), so every binary keeps its own prefix.
    #[must_use]
    pub fn with_env(
        command: clap::Command,
        env_prefix: &str,
        default_listen: &'static str,
    ) -> clap::Command {
        FLAGS
            .iter()
            .fold(command, |command, (id, suffix)| {
                command.mut_arg(*id, |arg| arg.env(format!("{env_prefix}_{suffix}")))
            })
            .mut_arg("listen", |arg| arg.default_value(default_listen))
    }

    /// The TLS settings, when a certificate and key were given.
    #[must_use]
    pub fn tls(&self) -> Option<ServerTls> {
        self.tls_cert
            .clone()
            .zip(self.tls_key.clone())
            .map(|(cert, key)| ServerTls {
                cert,
                key,
                client_ca: self.tls_client_ca.clone(),
            })
    }

    /// How [`serve`] should serve.
    #[must_use]
    pub fn options(&self) -> ServeOptions {
        ServeOptions {
            tls: self.tls(),
            legacy_fields: self.legacy_fields,
        }
    }

    /// Serves `provider` on `--listen` until Ctrl-C, then drains in-flight calls.
    ///
    /// # Errors
    /// [`ServeError::Bind`] when the address cannot be bound; see [`serve`].
    pub async fn serve<P: CloudProvider>(&self, provider: Arc<P>) -> Result<(), ServeError> {
        let listener = tokio::net::TcpListener::bind(self.listen)
            .await
            .map_err(|source| ServeError::Bind {
                address: self.listen,
                source,
            })?;
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        serve(provider, listener, self.options(), shutdown).await
    }
}

/// `--log-format`, which every provider binary has (global to its subcommands, so it may
/// stand before or after one).
#[derive(Debug, Clone, clap::Args)]
pub struct LogArgs {
    /// Log format: text or json (level: RUST_LOG, default info).
    #[arg(long, default_value = "text", global = true)]
    pub log_format: LogFormat,
}

impl LogArgs {
    /// `command` (which flattens [`LogArgs`]) with `--log-format`'s environment variable
    /// named `<env_prefix>_LOG_FORMAT` (the Helm charts set it).
    #[must_use]
    pub fn with_env(command: clap::Command, env_prefix: &str) -> clap::Command {
        command.mut_arg("log_format", |arg| {
            arg.env(format!("{env_prefix}_LOG_FORMAT"))
        })
    }
}

/// What a cloud's provider binary (AWS, GCE) is asked to do.
#[derive(Debug, clap::Subcommand)]
pub enum CloudCommand {
    /// Serve the provider over gRPC.
    Serve(ServeArgs),
    /// Print the NodeGroup objects (YAML) of every usable group, for `kubectl apply -f -`.
    PrintNodegroups,
}

impl CloudCommand {
    /// `command` (whose subcommands are [`CloudCommand`]'s and which flattens [`LogArgs`])
    /// with every flag's environment variable under `env_prefix` (see
    /// [`ServeArgs::with_env`], [`LogArgs::with_env`]) and `serve --listen` defaulting to
    /// `default_listen`.
    #[must_use]
    pub fn with_env(
        command: clap::Command,
        env_prefix: &str,
        default_listen: &'static str,
    ) -> clap::Command {
        LogArgs::with_env(command, env_prefix).mut_subcommand("serve", |serve| {
            ServeArgs::with_env(serve, env_prefix, default_listen)
        })
    }
}

/// Parses the command line into `T` through `command`, as `T::parse()` would (help, version
/// and errors print and exit), for a command edited first (e.g. by [`ServeArgs::with_env`]).
#[must_use]
pub fn parse_with<T: clap::FromArgMatches>(mut command: clap::Command) -> T {
    let matches = command.get_matches_mut();
    T::from_arg_matches(&matches).unwrap_or_else(|err| err.format(&mut command).exit())
}

/// The `NodeGroup` objects for `specs`, by object name, as a YAML stream for
/// `kubectl apply -f -`.
///
/// # Errors
/// A YAML rendering error.
pub fn nodegroups_yaml<'a>(
    specs: impl IntoIterator<Item = (String, &'a dra_api::NodeGroupSpec)>,
) -> Result<String, serde_saphyr::SerializeError> {
    let mut out = String::new();
    for (name, spec) in specs {
        let object = dra_api::NodeGroup::new(&name, spec.clone());
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&object)?);
    }
    Ok(out)
}

/// What `print-nodegroups` does: one `# skipped <group>: <reason>` line on stderr per group
/// that cannot be used, a `# warning: no usable node group found …` line with `none_found`
/// (where to look) when nothing is printed, and the YAML of the usable groups on stdout (a
/// closed pipe ends it quietly rather than panicking).
///
/// # Errors
/// A YAML rendering or write error.
pub fn print_nodegroups<'a>(
    specs: impl IntoIterator<Item = (String, &'a dra_api::NodeGroupSpec)>,
    skipped: &std::collections::BTreeMap<String, String>,
    none_found: &str,
) -> std::io::Result<()> {
    eprint!("{}", skipped_lines(skipped));
    let specs: Vec<(String, &dra_api::NodeGroupSpec)> = specs.into_iter().collect();
    if specs.is_empty() {
        eprint!("{}", none_found_line(skipped.len(), none_found));
    }
    let yaml = nodegroups_yaml(specs)
        .map_err(|err| std::io::Error::other(format!("rendering NodeGroup YAML: {err}")))?;
    match std::io::stdout().lock().write_all(yaml.as_bytes()) {
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// `print-nodegroups`' stderr line per group that cannot be used.
fn skipped_lines(skipped: &std::collections::BTreeMap<String, String>) -> String {
    skipped
        .iter()
        .map(|(group, reason)| format!("# skipped {group}: {reason}\n"))
        .collect()
}

/// `print-nodegroups`' stderr line when no group is usable: how many were skipped, and
/// where to look (`hint`).
fn none_found_line(skipped: usize, hint: &str) -> String {
    let note = if skipped == 0 {
        String::new()
    } else {
        format!(" ({skipped} found and skipped, see above)")
    };
    format!("# warning: no usable node group found{note}; {hint}\n")
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches, Parser};

    use super::*;

    /// The shape of the AWS and GCE binaries: serve flags under a subcommand.
    #[derive(Debug, Parser)]
    struct WithSubcommand {
        #[command(flatten)]
        log: LogArgs,
        #[command(subcommand)]
        command: CloudCommand,
    }

    /// The shape of the fake's binary: serve flags at the top.
    #[derive(Debug, Parser)]
    struct Flat {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn env_of(command: &clap::Command, id: &str) -> Option<String> {
        command
            .get_arguments()
            .find(|a| a.get_id() == id)
            .and_then(|a| a.get_env())
            .map(|e| e.to_string_lossy().into_owned())
    }

    #[test]
    fn every_serve_flag_has_the_binarys_environment_variable() {
        let command = CloudCommand::with_env(WithSubcommand::command(), "DRA_AWS", "0.0.0.0:8086");
        assert_eq!(
            env_of(&command, "log_format").as_deref(),
            Some("DRA_AWS_LOG_FORMAT")
        );
        let serve = command.find_subcommand("serve").expect("serve");
        for (id, env) in [
            ("listen", "DRA_AWS_LISTEN"),
            ("tls_cert", "DRA_AWS_TLS_CERT"),
            ("tls_key", "DRA_AWS_TLS_KEY"),
            ("tls_client_ca", "DRA_AWS_TLS_CLIENT_CA"),
            ("legacy_fields", "DRA_AWS_LEGACY_FIELDS"),
        ] {
            assert_eq!(env_of(serve, id).as_deref(), Some(env), "{id}");
        }
        let flat = ServeArgs::with_env(Flat::command(), "DRA_FAKE", "127.0.0.1:8086");
        assert_eq!(env_of(&flat, "listen").as_deref(), Some("DRA_FAKE_LISTEN"));

        let matches = command
            .clone()
            .try_get_matches_from(["p", "serve", "--legacy-fields"])
            .expect("serve");
        match WithSubcommand::from_arg_matches(&matches)
            .expect("parsed")
            .command
        {
            CloudCommand::Serve(serve) => {
                assert!(serve.legacy_fields);
                assert_eq!(serve.listen, "0.0.0.0:8086".parse().expect("addr"));
            }
            CloudCommand::PrintNodegroups => panic!("parsed the wrong subcommand"),
        }

        // `--log-format` is global: after the subcommand too.
        let parsed = WithSubcommand::from_arg_matches(
            &command
                .clone()
                .try_get_matches_from(["p", "print-nodegroups", "--log-format", "json"])
                .expect("global flag after the subcommand"),
        )
        .expect("parsed");
        assert_eq!(parsed.log.log_format, LogFormat::Json);
        assert!(matches!(parsed.command, CloudCommand::PrintNodegroups));
    }

    #[test]
    fn flags_parse_into_serve_options() {
        let command = ServeArgs::with_env(Flat::command(), "DRA_TEST_UNSET", "127.0.0.1:8086");
        let flat: Flat = Flat::from_arg_matches(
            &command
                .clone()
                .try_get_matches_from(["p"])
                .expect("no flags"),
        )
        .expect("parsed");
        assert_eq!(flat.serve.listen, "127.0.0.1:8086".parse().expect("addr"));
        assert!(flat.serve.tls().is_none());
        assert!(!flat.serve.options().legacy_fields);

        let matches = command
            .clone()
            .try_get_matches_from([
                "p",
                "--listen",
                "0.0.0.0:9000",
                "--tls-cert",
                "c.pem",
                "--tls-key",
                "k.pem",
                "--tls-client-ca",
                "ca.pem",
                "--legacy-fields",
            ])
            .expect("all flags");
        let flat = Flat::from_arg_matches(&matches).expect("parsed");
        let options = flat.serve.options();
        let tls = options.tls.expect("tls");
        assert_eq!(
            (tls.cert, tls.key, tls.client_ca),
            ("c.pem".into(), "k.pem".into(), Some("ca.pem".into()))
        );
        assert!(options.legacy_fields);
        assert_eq!(flat.serve.listen.port(), 9000);

        // A certificate without its key is refused, as before.
        let err = command
            .try_get_matches_from(["p", "--tls-cert", "c.pem"])
            .expect_err("key missing");
        assert_eq!(err.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn skipped_groups_and_an_empty_discovery_are_said_on_stderr() {
        let skipped = std::collections::BTreeMap::from([(
            "p5-bad".to_owned(),
            "instance type p9.huge is unknown to DescribeInstanceTypes".to_owned(),
        )]);
        assert_eq!(
            skipped_lines(&skipped),
            "# skipped p5-bad: instance type p9.huge is unknown to DescribeInstanceTypes\n"
        );
        assert_eq!(
            none_found_line(skipped.len(), "check clusterName"),
            "# warning: no usable node group found (1 found and skipped, see above); check clusterName\n"
        );
        assert_eq!(
            none_found_line(0, "check clusterName"),
            "# warning: no usable node group found; check clusterName\n"
        );
    }

    #[test]
    fn nodegroups_print_as_one_yaml_document_each() {
        let spec: dra_api::NodeGroupSpec = serde_json::from_value(serde_json::json!({
            "provider": "fake", "providerID": "gpu", "minSize": 0, "maxSize": 2,
            "capacityType": "on-demand", "pricePerHour": 8.0,
            "template": {"labels": {"a": "b"}, "capacity": {"cpu": "8"}}
        }))
        .expect("spec");
        let yaml = nodegroups_yaml([("gpu-a".to_owned(), &spec), ("gpu-b".to_owned(), &spec)])
            .expect("yaml");
        assert_eq!(yaml.matches("---\n").count(), 2);
        assert!(yaml.contains("kind: NodeGroup"), "{yaml}");
        assert!(
            yaml.contains("name: gpu-a") && yaml.contains("name: gpu-b"),
            "{yaml}"
        );
    }
}
