//! Machine profiles a scenario names (`[sim] profile = "path"`, relative to
//! the scenario file) for the `runtime` reconfiguration mechanism, and the
//! built-in default.
//!
//! Reading is I/O, so it is a step of its own, [`Scenario::load_profiles`],
//! which the command calls between parsing and validating a file;
//! [`Scenario::validate`] then refuses a run whose profile was not read or
//! lacks a step its plans need.

use std::path::Path;

use dyncore_core::profile::MachineProfile;
use dyncore_core::reconfig::Mode;

use crate::cost::{Mechanism, check_profile, default_profile};
use crate::scenario::{Scenario, ScenarioError};

impl Scenario {
    /// Reads every profile the scenario names, relative to the folder of
    /// `scenario_file`. Errors name the field and the file.
    pub fn load_profiles(&mut self, scenario_file: &Path) -> Result<(), ScenarioError> {
        let dir = scenario_file.parent().unwrap_or(Path::new("."));
        let mut named: Vec<(Vec<String>, String)> = Vec::new();
        if let Some(p) = &self.sim.profile {
            named.push((vec!["sim".into(), "profile".into()], p.clone()));
        }
        for (i, run) in self.runs.iter().enumerate() {
            if let Some(p) = &run.sim.profile {
                named.push((vec!["run".into(), i.to_string(), "sim".into(), "profile".into()], p.clone()));
            }
        }
        for (path, name) in named {
            if self.profiles.contains_key(&name) {
                continue;
            }
            let file = dir.join(&name);
            // The same reader as the scenario's: its size cap, its refusal
            // of folders, devices and sockets, and its words.
            let text = crate::load::read_text(&file).map_err(|e| ScenarioError {
                path: path.clone(),
                message: format!("the machine profile {e}"),
            })?;
            let profile: MachineProfile = toml::from_str(&text).map_err(|e| {
                let at = e.span().map(|s| crate::load::line_col(&text, s.start));
                let at = at.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default();
                ScenarioError {
                    path: path.clone(),
                    message: format!(
                        "the machine profile `{}{at}` does not parse: {}",
                        file.display(),
                        e.message().trim().lines().map(str::trim).collect::<Vec<_>>().join("; ")
                    ),
                }
            })?;
            self.profiles.insert(name, profile);
        }
        Ok(())
    }

    /// The profile run `index` charges under `runtime`, and where it came
    /// from (the path as the scenario names it, or the built-in default's
    /// source). The scenario must have passed [`Scenario::validate`].
    pub fn profile_for(&self, index: usize) -> (String, &MachineProfile) {
        match self.sim.with(&self.runs[index].sim).profile {
            Some(name) => {
                let p = self.profiles.get(&name).expect("validated: the profile was read");
                (name, p)
            }
            None => {
                let (source, p) = default_profile();
                (format!("built-in: {source}"), p)
            }
        }
    }

    /// Run `index` under `runtime` has a profile that was read and costs
    /// every step of its plans.
    pub(crate) fn validate_profile(&self, index: usize) -> Result<(), ScenarioError> {
        let run = &self.runs[index];
        let params = self.sim.with(&run.sim);
        if params.reconfig != Mechanism::Runtime {
            return Ok(());
        }
        let idx = index.to_string();
        let path: Vec<&str> = match (&run.sim.profile, &self.sim.profile) {
            (Some(_), _) => vec!["run", &idx, "sim", "profile"],
            (None, Some(_)) => vec!["sim", "profile"],
            (None, None) if run.sim.reconfig.is_some() => vec!["run", &idx, "sim", "reconfig"],
            (None, None) => vec!["sim", "reconfig"],
        };
        let err =
            |message: String| ScenarioError { path: path.iter().map(|s| s.to_string()).collect(), message };
        let profile = match &params.profile {
            Some(name) => self.profiles.get(name).ok_or_else(|| {
                err(format!("profile `{name}` was not read (the caller must call Scenario::load_profiles)"))
            })?,
            None => default_profile().1,
        };
        check_profile(profile, Mode::Bolt).map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNTIME: &str = r#"
name = "t"
title = "t"
[sim]
reconfig = "runtime"
[[run]]
label = "a"
machine = "dynamic"
policy = "chameleon"
[[run.workload]]
program = "nqueen"
"#;

    fn fixture_dir() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
    }

    #[test]
    fn runtime_uses_the_built_in_profile_unless_one_is_named() {
        let s = Scenario::from_toml(RUNTIME).unwrap();
        s.validate().unwrap();
        assert!(s.profile_for(0).0.starts_with("built-in: "), "{}", s.profile_for(0).0);
        // Named, relative to the scenario file's folder.
        let text = RUNTIME
            .replace("reconfig = \"runtime\"", "reconfig = \"runtime\"\nprofile = \"profile-2cpu.toml\"");
        let mut s = Scenario::from_toml(&text).unwrap();
        let err = s.validate().unwrap_err();
        assert_eq!(err.dotted_path(), "sim.profile");
        assert!(err.message.contains("load_profiles"), "{err}");
        s.load_profiles(&fixture_dir().join("scenario.toml")).unwrap();
        s.validate().unwrap();
        assert_eq!(s.profile_for(0).0, "profile-2cpu.toml");
    }

    #[test]
    fn a_missing_or_bad_profile_names_the_field_and_the_file() {
        let text = RUNTIME
            .replace("policy = \"chameleon\"", "policy = \"chameleon\"\n[run.sim]\nprofile = \"nope.toml\"");
        let mut s = Scenario::from_toml(&text).unwrap();
        let e = s.load_profiles(&fixture_dir().join("scenario.toml")).unwrap_err();
        assert_eq!(e.dotted_path(), "run[0].sim.profile");
        assert!(e.message.contains("nope.toml"), "{e}");
        // A TOML file that is not a profile.
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let text = text.replace("nope.toml", "Cargo.toml");
        let mut s = Scenario::from_toml(&text).unwrap();
        let e = s.load_profiles(&here).unwrap_err();
        assert!(e.message.contains("does not parse") && e.message.contains("Cargo.toml:1:2"), "{e}");
    }
}
