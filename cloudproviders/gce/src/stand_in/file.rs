//! A stand-in world from a YAML file, for the `dra-gce-stand-in` binary: a project, its
//! machine types, instance templates, MIGs, reservations and zone capacities.
//!
//! ```yaml
//! project: demo
//! machineTypes:
//!   - {name: n2-standard-16, cpus: 16, memoryMb: 65536}
//!   - {name: a3-highgpu-8g, cpus: 208, memoryMb: 1916928,
//!      accelerators: [{type: nvidia-h100-80gb, count: 8}]}
//! templates:                      # instance template properties, as the API returns them
//!   - name: cpu
//!     properties: {machineType: n2-standard-16, labels: {goog-k8s-cluster-name: demo}}
//! migs:
//!   - {name: gke-demo-cpu, zone: us-central1-a, template: cpu}
//!   - {name: gke-demo-cpu-r, region: us-central1, zones: [us-central1-a, us-central1-b], template: cpu}
//! reservations:
//!   - {name: h100-block, zone: us-central1-c, machineType: a3-highgpu-8g, count: 4, inUse: 0}
//! capacity: {us-central1-b: 0}    # VMs a zone can still start (absent: unlimited)
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::World;

/// The file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorldFile {
    /// Project id.
    pub project: String,
    /// Machine types.
    #[serde(default)]
    pub machine_types: Vec<MachineTypeEntry>,
    /// Instance templates.
    #[serde(default)]
    pub templates: Vec<TemplateEntry>,
    /// MIGs.
    #[serde(default)]
    pub migs: Vec<MigEntry>,
    /// Specific reservations.
    #[serde(default)]
    pub reservations: Vec<ReservationEntry>,
    /// VMs each zone can still start.
    #[serde(default)]
    pub capacity: BTreeMap<String, usize>,
}

/// One machine type.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineTypeEntry {
    /// Name.
    pub name: String,
    /// vCPUs.
    pub cpus: i64,
    /// Memory in MB.
    pub memory_mb: i64,
    /// Attached accelerators.
    #[serde(default)]
    pub accelerators: Vec<AcceleratorEntry>,
}

/// Accelerators of a machine type.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcceleratorEntry {
    /// Accelerator type, e.g. `nvidia-h100-80gb`.
    #[serde(rename = "type")]
    pub type_: String,
    /// How many.
    pub count: i64,
}

/// One global instance template.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateEntry {
    /// Name.
    pub name: String,
    /// `properties` as the API returns them.
    pub properties: Value,
}

/// One MIG, zonal (`zone`) or regional (`region` and `zones`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigEntry {
    /// Name.
    pub name: String,
    /// Zone of a zonal MIG.
    #[serde(default)]
    pub zone: Option<String>,
    /// Region of a regional MIG.
    #[serde(default)]
    pub region: Option<String>,
    /// Zones of a regional MIG.
    #[serde(default)]
    pub zones: Vec<String>,
    /// Name of its template in `templates`.
    pub template: String,
    /// Running instances at start.
    #[serde(default)]
    pub size: i64,
}

/// One specific reservation.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReservationEntry {
    /// Name.
    pub name: String,
    /// Zone.
    pub zone: String,
    /// Machine type it holds.
    pub machine_type: String,
    /// VMs it holds.
    pub count: i64,
    /// VMs in it now.
    #[serde(default)]
    pub in_use: i64,
}

/// A world file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WorldFileError {
    /// Unreadable.
    #[error("unable to read stand-in world file {path}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Not the expected YAML.
    #[error("stand-in world file {path} is not valid: {message}")]
    Invalid {
        /// The path.
        path: String,
        /// What is wrong.
        message: String,
    },
}

impl WorldFile {
    /// Reads a file.
    ///
    /// # Errors
    /// [`WorldFileError`].
    pub fn load(path: &Path) -> Result<Self, WorldFileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| WorldFileError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text, &shown)
    }

    /// Parses YAML text; `origin` names it in errors.
    ///
    /// # Errors
    /// [`WorldFileError::Invalid`], naming the MIG whose template or location is missing.
    pub fn parse(text: &str, origin: &str) -> Result<Self, WorldFileError> {
        let invalid = |message: String| WorldFileError::Invalid {
            path: origin.to_owned(),
            message,
        };
        let file: Self = serde_saphyr::from_str(text).map_err(|e| invalid(e.to_string()))?;
        for mig in &file.migs {
            if mig.zone.is_none() == mig.region.is_none() {
                return Err(invalid(format!(
                    "MIG {:?} needs exactly one of zone and region",
                    mig.name
                )));
            }
            if mig.region.is_some() && mig.zones.is_empty() {
                return Err(invalid(format!("regional MIG {:?} needs zones", mig.name)));
            }
        }
        Ok(file)
    }

    /// The world it describes. A MIG naming a template the file does not have points at a
    /// template URL that does not exist (how a deleted template looks).
    #[must_use]
    pub fn world(&self) -> World {
        let mut world = World::new(&self.project);
        for m in &self.machine_types {
            let accelerators: Vec<(&str, i64)> = m
                .accelerators
                .iter()
                .map(|a| (a.type_.as_str(), a.count))
                .collect();
            world.add_machine_type(&m.name, m.cpus, m.memory_mb, &accelerators);
        }
        let mut links = BTreeMap::new();
        for t in &self.templates {
            links.insert(
                t.name.clone(),
                world.add_template(&t.name, t.properties.clone()),
            );
        }
        for mig in &self.migs {
            let template = links.get(&mig.template).cloned().unwrap_or_else(|| {
                super::world::url(
                    &self.project,
                    &format!("global/instanceTemplates/{}", mig.template),
                )
            });
            match (&mig.zone, &mig.region) {
                (Some(zone), _) => world.add_zonal_mig(&mig.name, zone, &template, mig.size),
                (None, Some(region)) => {
                    let zones: Vec<&str> = mig.zones.iter().map(String::as_str).collect();
                    world.add_regional_mig(&mig.name, region, &zones, &template, mig.size);
                }
                (None, None) => {}
            }
        }
        for r in &self.reservations {
            world.add_reservation(&r.name, &r.zone, &r.machine_type, r.count, r.in_use);
        }
        world.capacity.clone_from(&self.capacity);
        world
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_world_file_gives_its_migs_templates_and_capacity() {
        let file = WorldFile::parse(
            "project: demo\nmachineTypes: [{name: n2-standard-16, cpus: 16, memoryMb: 65536}]\n\
             templates: [{name: cpu, properties: {machineType: n2-standard-16}}]\n\
             migs: [{name: gke-demo-cpu, zone: us-central1-a, template: cpu, size: 1},\n\
                    {name: gke-demo-gone, zone: us-central1-a, template: deleted}]\n\
             capacity: {us-central1-b: 0}\n",
            "test",
        )
        .expect("parses");
        let mut world = file.world();
        assert_eq!(world.capacity["us-central1-b"], 0);
        let cpu = world
            .mig("us-central1-a", "gke-demo-cpu")
            .expect("mig")
            .clone();
        assert_eq!(cpu.managed.len(), 1);
        assert!(cpu.template.ends_with("/global/instanceTemplates/cpu"));
        assert!(world.templates.contains_key("cpu"));
        assert!(!world.templates.contains_key("deleted"));
        let err = WorldFile::parse("project: demo\nmigs: [{name: m, template: t}]\n", "test")
            .expect_err("no location");
        assert!(
            err.to_string().contains("exactly one of zone and region"),
            "{err}"
        );
    }
}
