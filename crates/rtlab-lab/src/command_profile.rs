//! `--profile NAME` on a probe command: the profile a scenario case runs under, for one
//! command's run. Its process settings are the base under the probe's own flags; its steps
//! are applied (journaled) once the machine is the command's and put back when the
//! measurement ends (Ctrl-C and errors included: the guard restores on drop, `tune restore`
//! after a kill -9); what it did goes into the result document as `config.profile`.
//!
//! Contract: the same steps, journal and restore as a scenario case ([`CaseSetup`]), with
//! no load.

use crate::error::LabError;
use crate::executor::setup::CaseSetup;
use rtlab_core::rt::RtSettings;
use rtlab_tune::profile::NamedProfile;

/// A probe command's `--profile`, resolved.
pub struct CommandProfile {
    named: NamedProfile,
    online: Vec<usize>,
}

impl CommandProfile {
    /// NAME: a built-in (`rt-normal`), or `./FILE.toml[#NAME]` from the working directory.
    pub fn resolve(name: &str) -> Result<CommandProfile, LabError> {
        let here = std::env::current_dir().unwrap_or_else(|_| "/".into());
        let named = rtlab_tune::profile::resolve(name, &here)
            .map_err(|e| LabError::Failed(format!("--profile {name}: {e}")))?;
        let (online, _) = crate::host::online_cpus();
        Ok(CommandProfile { named, online })
    }

    pub fn name(&self) -> &str {
        &self.named.name
    }

    /// The real-time settings the probe's own flags go over.
    pub fn base(&self) -> RtSettings {
        self.named.profile.rt_settings(&self.online, None)
    }

    /// Apply it for a probe that runs with `rt` (its flags over [`Self::base`]): the process
    /// gets the application settings when the probe pins the process (`pins_process`, as
    /// [`crate::probe::Probe::pins_process`]) or the profile isolates CPUs, as in a scenario
    /// case.
    pub fn apply(&self, pins_process: bool, rt: &RtSettings) -> Result<Applied, LabError> {
        let isolation = self.named.profile.isolate_cpus.is_some();
        let pids = if pins_process || isolation { vec![std::process::id() as i32] } else { vec![] };
        let setup = CaseSetup::start_loads(
            vec![],
            &self.named,
            rt.cpu_of(0),
            pids,
            std::time::Duration::ZERO,
        )?;
        Ok(Applied { setup })
    }
}

/// A profile in force for a command's run, put back by [`Applied::finish`] or on drop.
pub struct Applied {
    setup: CaseSetup,
}

impl Applied {
    /// What each step did, one line each (`done    what (detail)`), as `tune apply` says.
    pub fn lines(&self) -> Vec<String> {
        let Some(p) = &self.setup.profile_report else { return vec![] };
        p["steps"]
            .as_array()
            .map(|steps| {
                steps
                    .iter()
                    .map(|s| {
                        let detail = s["detail"].as_str().unwrap_or("");
                        format!(
                            "{:<7} {}{}",
                            s["status"].as_str().unwrap_or("?"),
                            s["what"].as_str().unwrap_or("?"),
                            if detail.is_empty() { String::new() } else { format!(" ({detail})") }
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Put it back; returns the report (`profile`, `steps`, `restored`, `restore_failed`) and
    /// the warning when something could not be put back.
    pub fn finish(mut self) -> (serde_json::Value, Option<rtlab_core::schema::Warning>) {
        self.setup.finish();
        let w = self.setup.restore_warning();
        (self.setup.profile_report.take().unwrap_or_default(), w)
    }

    /// [`Self::finish`] into the measured document: the report as `config.profile`, the
    /// warning with the others. True when everything was put back.
    pub fn finish_into(self, doc: &mut rtlab_core::schema::ResultDocument) -> bool {
        let (report, warning) = self.finish();
        if let Some(obj) = doc.config.as_object_mut() {
            obj.insert("profile".into(), report);
        }
        let clean = warning.is_none();
        doc.warnings.extend(warning);
        clean
    }
}
