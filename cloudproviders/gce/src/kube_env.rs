//! The `kube-env` metadata of a GKE node pool's instance template: what the node's kubelet will
//! be told, read as cluster-autoscaler's GCE provider reads it (`kube_env.go`, `templates.go`).
//!
//! `kube-env` is a YAML map of strings. Its `AUTOSCALER_ENV_VARS` entry is
//! `name=value;name=value` with `node_labels=k=v,k=v`, `node_taints=k=v:Effect,…`,
//! `kube_reserved=cpu=…,memory=…,ephemeral-storage=…`, `evictionHard=memory.available=…,…`;
//! older templates put `NODE_LABELS`/`NODE_TAINTS` at the top level and `--kube-reserved=` in
//! `KUBELET_TEST_ARGS`. `--max-pods=` comes from `KUBELET_ARGS`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The metadata key holding it.
pub const KUBE_ENV_KEY: &str = "kube-env";

/// A parsed `kube-env`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeEnv {
    vars: BTreeMap<String, String>,
}

/// A `kube-env` that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kube-env: {0}")]
pub struct KubeEnvError(pub String);

fn key_values(list: &str) -> Result<BTreeMap<String, String>, KubeEnvError> {
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .ok_or_else(|| KubeEnvError(format!("{pair:?} is not key=value")))
        })
        .collect()
}

impl KubeEnv {
    /// Parses the metadata value.
    ///
    /// # Errors
    /// [`KubeEnvError`] when it is not a YAML map.
    pub fn parse(text: &str) -> Result<Self, KubeEnvError> {
        let raw: BTreeMap<String, serde_json::Value> =
            serde_saphyr::from_str(text).map_err(|e| KubeEnvError(e.to_string()))?;
        let vars = raw
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Null => String::new(),
                    other => other.to_string(),
                };
                (k, v)
            })
            .collect();
        Ok(Self { vars })
    }

    /// The kube-env of a template's metadata items; empty when there is none.
    ///
    /// # Errors
    /// [`KubeEnvError`] when it is present but unreadable.
    pub fn of_metadata<'a>(
        items: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, KubeEnvError> {
        match items.into_iter().find(|(k, _)| *k == KUBE_ENV_KEY) {
            Some((_, value)) => Self::parse(value),
            None => Ok(Self::default()),
        }
    }

    /// A top-level variable.
    #[must_use]
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// True when the template had a kube-env (a GKE node pool).
    #[must_use]
    pub fn is_present(&self) -> bool {
        !self.vars.is_empty()
    }

    /// A variable of `AUTOSCALER_ENV_VARS`.
    ///
    /// # Errors
    /// [`KubeEnvError`] when an entry is not `name=value`.
    pub fn autoscaler_var(&self, name: &str) -> Result<Option<String>, KubeEnvError> {
        let Some(all) = self
            .var("AUTOSCALER_ENV_VARS")
            .filter(|v| !v.trim().is_empty())
        else {
            return Ok(None);
        };
        for entry in all.split(';') {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let (key, value) = entry
                .split_once('=')
                .ok_or_else(|| KubeEnvError(format!("malformed autoscaler var {entry:?}")))?;
            if key.trim() == name {
                return Ok(Some(value.trim().trim_matches(['"', '\'']).to_owned()));
            }
        }
        Ok(None)
    }

    /// Node labels (`node_labels`, else `NODE_LABELS`).
    ///
    /// # Errors
    /// [`KubeEnvError`] for a malformed list.
    pub fn labels(&self) -> Result<BTreeMap<String, String>, KubeEnvError> {
        let list = match self.autoscaler_var("node_labels")? {
            Some(v) => v,
            None => self.var("NODE_LABELS").unwrap_or_default().to_owned(),
        };
        key_values(&list)
    }

    /// Node taints (`node_taints`, else `NODE_TAINTS`), each `key=value:Effect`.
    ///
    /// # Errors
    /// [`KubeEnvError`] for a taint without an effect.
    pub fn taints(&self) -> Result<Vec<Taint>, KubeEnvError> {
        let list = match self.autoscaler_var("node_taints")? {
            Some(v) => v,
            None => self.var("NODE_TAINTS").unwrap_or_default().to_owned(),
        };
        key_values(&list)?
            .into_iter()
            .map(|(key, value)| {
                let (value, effect) = value
                    .split_once(':')
                    .ok_or_else(|| KubeEnvError(format!("taint {key}={value:?} has no :Effect")))?;
                Ok(Taint {
                    key,
                    value: Some(value.to_owned()).filter(|v| !v.is_empty()),
                    effect: effect.to_owned(),
                    ..Taint::default()
                })
            })
            .collect()
    }

    /// `kubeReserved` (`kube_reserved`, else `--kube-reserved=` of `KUBELET_TEST_ARGS`), only the
    /// cpu, memory and ephemeral-storage entries.
    ///
    /// # Errors
    /// [`KubeEnvError`] for a malformed list.
    pub fn kube_reserved(&self) -> Result<Option<BTreeMap<String, Quantity>>, KubeEnvError> {
        let list = match self.autoscaler_var("kube_reserved")? {
            Some(v) => Some(v),
            None => self.flag("KUBELET_TEST_ARGS", "--kube-reserved="),
        };
        let Some(list) = list else {
            return Ok(None);
        };
        Ok(Some(
            key_values(&list)?
                .into_iter()
                .filter(|(k, _)| matches!(k.as_str(), "cpu" | "memory" | "ephemeral-storage"))
                .map(|(k, v)| (k, Quantity(v)))
                .collect(),
        ))
    }

    /// `evictionHard` `memory.available`.
    ///
    /// # Errors
    /// [`KubeEnvError`] for a malformed list.
    pub fn eviction_hard_memory(&self) -> Result<Option<Quantity>, KubeEnvError> {
        Ok(self
            .autoscaler_var("evictionHard")?
            .map(|v| key_values(&v))
            .transpose()?
            .and_then(|m| m.get("memory.available").cloned())
            .map(Quantity))
    }

    /// `--max-pods=` of `KUBELET_ARGS`.
    #[must_use]
    pub fn max_pods(&self) -> Option<u32> {
        self.flag("KUBELET_ARGS", "--max-pods=")
            .and_then(|v| v.parse().ok())
    }

    fn flag(&self, var: &str, prefix: &str) -> Option<String> {
        self.var(var)?
            .split_whitespace()
            .find_map(|arg| arg.strip_prefix(prefix))
            .map(ToOwned::to_owned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The shape of a GKE GPU node pool's kube-env (cluster-autoscaler's templates_test.go and
    // kube_env_test.go use the same keys).
    const GKE: &str = "ENABLE_NODE_PROBLEM_DETECTOR: standalone\n\
KUBELET_ARGS: --v=2 --cloud-provider=external --max-pods=64 --experimental-mounter-path=/home/kubernetes/containerized_mounter/mounter\n\
AUTOSCALER_ENV_VARS: node_labels=cloud.google.com/gke-nodepool=gpu-pool,cloud.google.com/gke-accelerator=nvidia-h100-80gb,cloud.google.com/gke-gpu-dra-driver=true;node_taints=nvidia.com/gpu=present:NoSchedule;kube_reserved=cpu=1060m,memory=9Gi,ephemeral-storage=41Gi;os_distribution=cos;os=linux;evictionHard=memory.available=100Mi,nodefs.available=10%\n";

    #[test]
    fn a_gke_node_pool_kube_env_gives_labels_taints_and_reservations() {
        let env = KubeEnv::parse(GKE).expect("kube-env");
        let labels = env.labels().expect("labels");
        assert_eq!(labels["cloud.google.com/gke-nodepool"], "gpu-pool");
        assert_eq!(
            labels["cloud.google.com/gke-accelerator"],
            "nvidia-h100-80gb"
        );
        let taints = env.taints().expect("taints");
        assert_eq!(
            (
                taints[0].key.as_str(),
                taints[0].value.as_deref(),
                taints[0].effect.as_str()
            ),
            ("nvidia.com/gpu", Some("present"), "NoSchedule")
        );
        let reserved = env.kube_reserved().expect("reserved").expect("present");
        assert_eq!(reserved["cpu"].0, "1060m");
        assert_eq!(reserved["ephemeral-storage"].0, "41Gi");
        assert_eq!(
            env.eviction_hard_memory().expect("eviction"),
            Some(Quantity("100Mi".into()))
        );
        assert_eq!(env.max_pods(), Some(64));
    }

    #[test]
    fn old_templates_use_top_level_variables() {
        let env = KubeEnv::parse(
            "NODE_LABELS: a=b,c=d\nNODE_TAINTS: 'k=v:NoExecute'\nKUBELET_TEST_ARGS: --kube-reserved=cpu=100m,memory=1Gi\n",
        )
        .expect("kube-env");
        assert_eq!(env.labels().expect("labels").len(), 2);
        assert_eq!(env.taints().expect("taints")[0].effect, "NoExecute");
        assert_eq!(
            env.kube_reserved().expect("reserved").expect("present")["memory"].0,
            "1Gi"
        );
        assert!(
            KubeEnv::parse("NODE_TAINTS: 'k=v'\n")
                .expect("yaml")
                .taints()
                .is_err()
        );
    }
}
