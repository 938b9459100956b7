//! Real-time profiles (S1's no-rt / rt-normal / rt-affinities / rt-isolation, S3's
//! rt-kthreads, and user profiles from a TOML file) and the plan that applies one to a
//! machine: a list of steps, each a set of journaled [`rtlab_host::session::Action`]s or a skip with its reason.
//!
//! Contract: planning only reads; what does not apply on this machine (no cpufreq, IRQs not
//! threaded, no VLAN, no cpuset controller, a qdisc the kernel lacks) becomes a skip naming why.
//! Interfaces: /proc/irq/N/smp_affinity (Documentation/core-api/irq/irq-affinity.rst),
//! cgroup-v1 cpusets (Documentation/admin-guide/cgroup-v1/cpusets.rst), cgroup-v2 cpuset
//! partitions (Documentation/admin-guide/cgroup-v2.rst, "Cpuset Interface Files"), tc-htb(8),
//! tc-mqprio(8), sched_setscheduler(2).
//!
//! The rooms: the profiles, their registry and their files in `catalog.rs`; the plan in
//! `plan.rs`, its steps in `step.rs` (cgroups and cpusets in `cgroup.rs`); applying a plan through a journaled
//! session, and what is still in force, in `apply.rs`.

mod apply;
mod catalog;
mod cgroup;
mod plan;
mod step;

pub use apply::{apply_named, apply_profile, apply_step, in_force, StepOutcome};
pub use cgroup::rt_cgroup_step;
pub use plan::{default_nic, nic_irqs, plan};
pub use step::{threads_of, Report, Step, Target};

pub use catalog::*;

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::rt::{Policy, RtSettings};

    use rtlab_host::testing::put;
    use std::path::Path;

    /// Today's settings (rtlab's `process_settings` before the registry): no-rt SCHED_OTHER
    /// 0 unlocked and unpinned; every rt-* FIFO 80 locked; rt-affinities and rt-isolation on
    /// the last online CPU; a policy override replaces the RT policy, never no-rt's.
    #[test]
    fn the_builtins_give_todays_process_settings() {
        let online = [0, 1, 2, 3];
        let rt = |name: &str, over| builtin(name).unwrap().rt_settings(&online, over);
        let pinned = |cpu| RtSettings { cpus: Some(vec![cpu]), ..RtSettings::fifo80() };
        assert_eq!(rt("no-rt", None), RtSettings::normal());
        assert_eq!(rt("rt-normal", None), RtSettings::fifo80());
        assert_eq!(rt("rt-kthreads", None), RtSettings::fifo80());
        assert_eq!(rt("rt-affinities", None), pinned(3));
        assert_eq!(rt("rt-isolation", None), pinned(3));
        for name in builtin_names() {
            assert_eq!(rt(name, Some(Policy::Fifo)), rt(name, None), "{name}");
        }
        assert_eq!(rt("no-rt", Some(Policy::Rr)), RtSettings::normal());
        assert_eq!(rt("no-rt", Some(Policy::Fifo)), RtSettings::normal());
        assert_eq!(
            rt("rt-normal", Some(Policy::Rr)),
            RtSettings { policy: Policy::Rr, ..RtSettings::fifo80() }
        );
        assert_eq!(
            rt("rt-affinities", Some(Policy::Other)),
            RtSettings { policy: Policy::Other, priority: 0, ..pinned(3) }
        );
        assert_eq!(builtin("rt-affinities").unwrap().rt_settings(&[0, 1], None), pinned(1));
        assert_eq!(builtin("rt-affinities").unwrap().rt_settings(&[], None).cpus, None);
    }

    #[test]
    fn a_user_profile_gets_its_own_process_settings() {
        let p = Profile {
            app_policy: Some(Policy::Rr),
            app_priority: Some(60),
            app_cpus: Some("others".into()),
            ..Default::default()
        };
        assert_eq!(
            p.rt_settings(&[0, 1, 2], None),
            RtSettings { policy: Policy::Rr, priority: 60, cpus: Some(vec![0, 1]), mlockall: true }
        );
        let p = Profile { mlockall: Some(false), app_cpus: Some("2".into()), ..p };
        assert_eq!(
            p.rt_settings(&[0, 1, 2], Some(Policy::Fifo)),
            RtSettings { policy: Policy::Fifo, priority: 60, cpus: Some(vec![2]), mlockall: false }
        );
        assert_eq!(Profile::default().rt_settings(&[0, 1], None), RtSettings::normal());
    }

    #[test]
    fn etf_releases_each_datagram_the_profiles_delta_before_its_time() {
        let d = tempfile::tempdir().unwrap();
        let f = "[profile.slow]\nqdisc = [\"etf\"]\netf_delta_us = 5000\n\
                 [profile.default]\nqdisc = [\"etf\"]\n";
        put(d.path(), "p.toml", f);
        let ps = load_file(&d.path().join("p.toml")).unwrap();
        let host = rtlab_host::host::FakeHost::new(d.path());
        let t = Target { nic: Some("eth0".into()), ..Default::default() };
        let etf = |p: &Profile| {
            let steps = plan(p, &t, &host);
            let a: Vec<String> = steps
                .iter()
                .flat_map(|s| s.alternatives.iter().flat_map(|a| a.1.iter()))
                .map(|a| a.describe())
                .collect();
            let label = steps.iter().flat_map(|s| &s.alternatives).map(|a| a.0.clone()).collect();
            (a.into_iter().find(|a| a.contains(" etf ")).unwrap(), label)
        };
        let (cmd, label): (String, Vec<String>) = etf(&ps["slow"]);
        assert!(cmd.contains("etf clockid CLOCK_TAI delta 5000000"), "{cmd}");
        assert!(label[0].contains("released 5000 us before its time"), "{label:?}");
        let (cmd, _) = etf(&ps["default"]);
        assert!(cmd.contains("delta 200000"), "{cmd}");
        for bad in ["0", "-5", "1000001"] {
            put(d.path(), "bad.toml", &format!("[profile.x]\netf_delta_us = {bad}\n"));
            let e = load_file(&d.path().join("bad.toml")).unwrap_err().to_string();
            assert!(e.contains(&format!("etf_delta_us = {bad}: must be 1 to 1000000")), "{e}");
        }
    }

    #[test]
    fn resolve_takes_builtins_and_user_files_beside_the_scenario() {
        let d = tempfile::tempdir().unwrap();
        let one = "[profile.fast]\nbase = \"rt-normal\"\napp_priority = 90\napp_policy = \"rr\"\n";
        put(d.path(), "one.toml", one);
        put(
            d.path(),
            "sub/two.toml",
            "[profile.a]\nbase = \"no-rt\"\n[profile.b]\nmlockall = true\n",
        );
        let r = resolve("rt-isolation", d.path()).unwrap();
        assert_eq!(
            (r.name.as_str(), r.profile),
            ("rt-isolation", builtin("rt-isolation").unwrap())
        );
        let r = resolve("./one.toml", d.path()).unwrap();
        assert_eq!(r.name, "./one.toml");
        assert_eq!(r.profile.app_policy, Some(Policy::Rr));
        assert_eq!(r.profile.rt_runtime_us, Some(-1), "the base is merged in");
        assert_eq!(r.profile.rt_settings(&[0, 1], None).priority, 90);
        assert!(resolve("one.toml", d.path()).is_ok(), "anything ending in .toml is a file");
        let abs = d.path().join("one.toml").display().to_string();
        assert!(resolve(&abs, Path::new("/nonexistent")).is_ok());
        let e = resolve("./sub/two.toml", d.path()).unwrap_err();
        assert!(matches!(e, ProfileError::Ambiguous { .. }), "{e}");
        assert!(e.to_string().contains("two.toml#NAME") && e.to_string().contains("a, b"), "{e}");
        let r = resolve("./sub/two.toml#b", d.path()).unwrap();
        assert_eq!((r.name.as_str(), r.profile.mlockall), ("./sub/two.toml#b", Some(true)));
        assert!(matches!(
            resolve("./sub/two.toml#c", d.path()),
            Err(ProfileError::NotInFile { .. })
        ));
        assert!(matches!(resolve("./none.toml", d.path()), Err(ProfileError::Read { .. })));
        let e = resolve("rt-fast", d.path()).unwrap_err();
        assert!(e.to_string().contains("no-rt, rt-normal") && e.to_string().contains("./my.toml"));
        put(d.path(), "bad.toml", "[profile.x]\napp_policy = \"deadline\"\n");
        let e = resolve("./bad.toml", d.path()).unwrap_err();
        assert!(matches!(e, ProfileError::File { .. }) && !e.to_string().contains('\n'), "{e}");
    }
}
