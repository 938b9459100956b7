//! The plan of a profile on a machine: the steps (each a set of journaled actions, or a skip
//! naming why it does not apply here), built by reading only.

use super::catalog::Profile;
use super::cgroup::{isolation, rt_cgroup_step};
use super::step::{policy_raw, resolve_cpus, threads_of, Step, Target};
use rtlab_core::rt::Policy;
use rtlab_host::host::Host;
use rtlab_host::session::Action;
use std::collections::BTreeMap;

/// The interface of the default route (/proc/net/route).
pub fn default_nic(host: &dyn Host) -> Option<String> {
    let t = host.read("/proc/net/route").ok()?;
    t.lines().skip(1).find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.get(1) == Some(&"00000000")).then(|| w[0].to_string())
    })
}

/// The queue IRQs of a NIC: its PCI device's MSI IRQs (not the config one), else the
/// /proc/interrupts lines that name it.
pub fn nic_irqs(host: &dyn Host, nic: &str) -> Vec<u32> {
    let interrupts = host.read("/proc/interrupts").unwrap_or_default();
    let name_of = |irq: u32| {
        interrupts
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{irq}:")))
            .map(|l| l.split_whitespace().last().unwrap_or("").to_string())
    };
    let mut irqs = Vec::new();
    let dev = host.path(&format!("/sys/class/net/{nic}/device"));
    for dir in [dev.join("msi_irqs"), dev.join("../msi_irqs")] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            irqs.extend(rd.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok()));
        }
        if !irqs.is_empty() {
            break;
        }
    }
    if irqs.is_empty() {
        for l in interrupts.lines() {
            let mut w = l.split_whitespace();
            if let (Some(n), Some(name)) = (w.next(), l.split_whitespace().last()) {
                if let Ok(irq) = n.trim_end_matches(':').parse::<u32>() {
                    if name.starts_with(nic) {
                        irqs.push(irq);
                    }
                }
            }
        }
    }
    irqs.retain(|&i| !name_of(i).is_some_and(|n| n.ends_with("-config")));
    irqs.sort_unstable();
    irqs.dedup();
    irqs
}

/// Every IRQ with an smp_affinity file.
fn all_irqs(host: &dyn Host) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(host.path("/proc/irq"))
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    v.sort_unstable();
    v
}

fn tc(netns: &Option<String>, args: &[&str]) -> Vec<String> {
    let mut v = vec!["tc".to_string()];
    if let Some(ns) = netns {
        v.push("-n".into());
        v.push(ns.clone());
    }
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// Build the plan of `p` on `host`.
pub fn plan(p: &Profile, t: &Target, host: &dyn Host) -> Vec<Step> {
    let (online, _) = rtlab_sys::cpus::online_cpus(host.root());
    let rt = t.rt_cpu.unwrap_or_else(|| *online.last().unwrap_or(&0));
    let env = rtlab_sys::env::detect(host.root());
    let mut steps = Vec::new();
    let tasks = rtlab_host::host::tasks(host);

    // before any real-time policy: a cgroup that gives none refuses it (EPERM, even to root)
    if p.app_policy.is_some_and(|pol| pol.is_realtime()) {
        steps.push(rt_cgroup_step(host, t));
    }

    // the application
    if let (Some(pol), Some(prio)) = (p.app_policy, p.app_priority) {
        let cpus = p.app_cpus.as_deref().map(|s| resolve_cpus(s, rt, &online));
        steps.push(app_step(host, t, pol, prio, cpus));
    }
    if let Some([lo, hi]) = p.middleware_priority {
        steps.push(Step::skip(
            format!("middleware threads: FIFO {lo}-{hi}"),
            "set by the pubsub probe on the threads it creates (no outside threads named)",
        ));
    }
    if let Some(v) = p.rt_runtime_us {
        steps.push(rt_throttling_step(host, v));
    }
    if let Some(g) = &p.governor {
        steps.push(governor_step(host, g, &online));
    }
    if let Some(v) = p.cpu_dma_latency_us {
        steps.push(dma_latency_step(host, v));
    }

    // the NIC
    let nic = t.nic.clone().or_else(|| default_nic(host));
    let irqs = match (&nic, &t.netns) {
        (Some(n), None) => nic_irqs(host, n),
        _ => vec![],
    };
    let nic_label = nic.clone().unwrap_or_else(|| "(no NIC)".into());
    if let Some(sel) = &p.nic_irq_cpus {
        steps.push(nic_irqs_step(t, &nic_label, &irqs, &resolve_cpus(sel, rt, &online)));
    }
    if let Some(sel) = &p.other_irq_cpus {
        steps.push(other_irqs_step(host, &irqs, &resolve_cpus(sel, rt, &online)));
    }
    if let Some(prio) = p.irq_thread_priority {
        steps.push(irq_threads_step(&tasks, &irqs, &nic_label, env.threaded_irqs, prio));
    }
    if let Some(prio) = p.ksoftirqd_priority {
        steps.push(ksoftirqd_step(&tasks, prio));
    }
    if let Some(sel) = &p.isolate_cpus {
        steps.push(isolation(host, t, resolve_cpus(sel, rt, &online), &online));
    }
    if let Some(kinds) = &p.qdisc {
        steps.push(qdisc_step(host, t, nic.as_deref(), kinds, p.etf_delta_us.unwrap_or(200)));
    }
    if p.vlan_egress_map == Some(true) {
        steps.push(vlan_egress_step(host, t, nic.as_deref(), &nic_label));
    }
    if steps.is_empty() {
        steps.push(Step::skip("nothing", "this profile changes nothing on the machine"));
    }
    steps
}

/// The application's threads (every thread of the `--pid`s): `pol` at `prio`, on `cpus`.
fn app_step(host: &dyn Host, t: &Target, pol: Policy, prio: i32, cpus: Option<Vec<usize>>) -> Step {
    let what = format!(
        "application: {pol} {prio}{}",
        cpus.as_ref().map(|c| format!(" on CPUs {}", rtlab_host::cpu_list(c))).unwrap_or_default()
    );
    if t.pids.is_empty() {
        return Step::skip(
            what,
            "no --pid given: rtlab's probes take these settings from the profile",
        );
    }
    let mut acts = Vec::new();
    for &pid in &t.pids {
        for tid in threads_of(host, pid).into_iter().filter(|tid| !t.keep.contains(tid)) {
            acts.push(Action::SetSched { pid: tid, policy: policy_raw(pol), priority: prio });
            if let Some(c) = &cpus {
                acts.push(Action::SetAffinity { pid: tid, cpus: c.clone() });
            }
        }
    }
    if acts.is_empty() {
        Step::skip(what, format!("pids {:?}: no such process", t.pids))
    } else {
        Step::act(what, acts)
    }
}

/// RT throttling: sched_rt_runtime_us = `v`.
fn rt_throttling_step(host: &dyn Host, v: i64) -> Step {
    if host.exists("/proc/sys/kernel/sched_rt_runtime_us") {
        Step::act(
            format!("RT throttling: sched_rt_runtime_us = {v}"),
            vec![Action::WriteFile {
                path: "/proc/sys/kernel/sched_rt_runtime_us".into(),
                value: v.to_string(),
            }],
        )
    } else {
        Step::skip("RT throttling", "no /proc/sys/kernel/sched_rt_runtime_us")
    }
}

/// The cpufreq governor `g` on every online CPU that offers it.
fn governor_step(host: &dyn Host, g: &str, online: &[usize]) -> Step {
    let mut acts = Vec::new();
    let mut lacking = Vec::new();
    for &c in online {
        let base = format!("/sys/devices/system/cpu/cpu{c}/cpufreq");
        if !host.exists(&format!("{base}/scaling_governor")) {
            continue;
        }
        let avail = host.read(&format!("{base}/scaling_available_governors")).unwrap_or_default();
        if avail.split_whitespace().any(|a| a == g) {
            acts.push(Action::WriteFile {
                path: format!("{base}/scaling_governor"),
                value: g.to_string(),
            });
        } else {
            lacking.push(c);
        }
    }
    if acts.is_empty() && lacking.is_empty() {
        Step::skip(
            format!("governor {g}"),
            "no cpufreq on this machine (a VM or a fixed frequency)",
        )
    } else if acts.is_empty() {
        Step::skip(
            format!("governor {g}"),
            format!("CPUs {} do not offer it", rtlab_host::cpu_list(&lacking)),
        )
    } else {
        Step::act(format!("governor {g}"), acts)
    }
}

/// /dev/cpu_dma_latency held at `v` us while rtlab runs.
fn dma_latency_step(host: &dyn Host, v: i32) -> Step {
    if host.exists("/dev/cpu_dma_latency") {
        Step::act(
            format!("/dev/cpu_dma_latency held at {v} us (no deep C-states) while rtlab runs"),
            vec![Action::HoldPmQos { path: "/dev/cpu_dma_latency".into(), value_us: v }],
        )
    } else {
        Step::skip("/dev/cpu_dma_latency", "no /dev/cpu_dma_latency (CONFIG_PM)")
    }
}

/// The NIC's queue IRQs (`irqs`) on `cpus`.
fn nic_irqs_step(t: &Target, nic_label: &str, irqs: &[u32], cpus: &[usize]) -> Step {
    let what = format!("{nic_label} queue IRQs on CPUs {}", rtlab_host::cpu_list(cpus));
    if let Some(ns) = &t.netns {
        Step::skip(
            what,
            format!("{nic_label} lives in netns {ns}: a virtual device without IRQs of its own"),
        )
    } else if irqs.is_empty() {
        Step::skip(what, format!("no IRQs found for {nic_label} (a virtual device?)"))
    } else {
        Step::act(
            format!(
                "{what} (IRQs {})",
                irqs.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",")
            ),
            irqs.iter()
                .map(|i| Action::WriteFile {
                    path: format!("/proc/irq/{i}/smp_affinity"),
                    value: rtlab_host::cpu_mask(cpus),
                })
                .collect(),
        )
    }
}

/// Every IRQ but the NIC's (`nic_irqs`), and the default affinity of new ones, on `cpus`.
fn other_irqs_step(host: &dyn Host, nic_irqs: &[u32], cpus: &[usize]) -> Step {
    let mut acts = vec![];
    if host.exists("/proc/irq/default_smp_affinity") {
        acts.push(Action::WriteFile {
            path: "/proc/irq/default_smp_affinity".into(),
            value: rtlab_host::cpu_mask(cpus),
        });
    }
    for i in all_irqs(host).into_iter().filter(|i| !nic_irqs.contains(i)) {
        if host.exists(&format!("/proc/irq/{i}/smp_affinity")) {
            acts.push(Action::WriteFile {
                path: format!("/proc/irq/{i}/smp_affinity"),
                value: rtlab_host::cpu_mask(cpus),
            });
        }
    }
    Step::act(
        format!(
            "every other IRQ on CPUs {} (some refuse: managed IRQs)",
            rtlab_host::cpu_list(cpus)
        ),
        acts,
    )
}

/// The irq/N threads of the NIC's IRQs: FIFO `prio`.
fn irq_threads_step(
    tasks: &[(i32, String)],
    irqs: &[u32],
    nic_label: &str,
    threaded_irqs: bool,
    prio: i32,
) -> Step {
    let threads: Vec<&(i32, String)> = tasks
        .iter()
        .filter(|(_, c)| {
            c.strip_prefix("irq/")
                .and_then(|r| r.split('-').next())
                .and_then(|n| n.parse::<u32>().ok())
                .is_some_and(|n| irqs.contains(&n))
        })
        .collect();
    let what = format!("{nic_label} IRQ threads: FIFO {prio}");
    if threads.is_empty() {
        Step::skip(
            what,
            if threaded_irqs {
                format!("no irq/N threads for {nic_label}'s IRQs {irqs:?}")
            } else {
                format!("IRQs are not threaded on this kernel (boot with threadirqs or use PREEMPT_RT); {nic_label}'s IRQs {irqs:?} run in hard-IRQ context")
            },
        )
    } else {
        Step::act(
            format!(
                "{what} ({})",
                threads.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>().join(", ")
            ),
            threads
                .iter()
                .map(|(pid, _)| Action::SetSched { pid: *pid, policy: 1, priority: prio })
                .collect(),
        )
    }
}

/// Every ksoftirqd/N: FIFO `prio`.
fn ksoftirqd_step(tasks: &[(i32, String)], prio: i32) -> Step {
    let k: Vec<&(i32, String)> =
        tasks.iter().filter(|(_, c)| c.starts_with("ksoftirqd/")).collect();
    if k.is_empty() {
        Step::skip(format!("ksoftirqd: FIFO {prio}"), "no ksoftirqd threads found")
    } else {
        Step::act(
            format!("ksoftirqd: FIFO {prio} ({} threads)", k.len()),
            k.iter()
                .map(|(pid, _)| Action::SetSched { pid: *pid, policy: 1, priority: prio })
                .collect(),
        )
    }
}

/// A file of /proc/net/vlan as the NIC's network namespace shows it (/proc/net shows the
/// reader's namespace: a --netns NIC's VLANs are read there).
fn vlan_file(host: &dyn Host, t: &Target, path: &str) -> Option<String> {
    match &t.netns {
        None => host.read(path).ok(),
        Some(ns) => host.run(&["ip", "netns", "exec", ns, "cat", path].map(String::from)).ok(),
    }
}

/// The egress map SKB priority n -> PCP n on every VLAN of the NIC.
fn vlan_egress_step(host: &dyn Host, t: &Target, nic: Option<&str>, nic_label: &str) -> Step {
    let vlans = vlan_file(host, t, "/proc/net/vlan/config");
    let what = format!("VLAN egress map on {nic_label}'s VLANs (SKB priority n -> PCP n)");
    match (vlans, nic) {
        (None, _) => Step::skip(what, "no VLAN here (8021q not loaded or not in this kernel)"),
        (Some(cfg), Some(n)) => {
            let mine: Vec<String> = cfg
                .lines()
                .skip(2)
                .filter(|l| l.split('|').nth(2).map(|d| d.trim()) == Some(n))
                .map(|l| l.split('|').next().unwrap_or("").trim().to_string())
                .collect();
            if mine.is_empty() {
                Step::skip(what, format!("no VLAN on {n}"))
            } else {
                Step::act(what, mine.iter().map(|v| vlan_egress_action(host, t, v)).collect())
            }
        }
        (Some(_), None) => Step::skip(what, "no NIC"),
    }
}

/// `ip link set VLAN type vlan egress-qos-map 0:0 .. 7:7`, undone to the map in force.
fn vlan_egress_action(host: &dyn Host, t: &Target, v: &str) -> Action {
    let map: Vec<String> = (0..8).map(|i| format!("{i}:{i}")).collect();
    // the map in force (/proc/net/vlan/DEV "EGRESS priority mappings: 0:0 5:3"), unmapped = 0
    let info = vlan_file(host, t, &format!("/proc/net/vlan/{v}")).unwrap_or_default();
    let old: BTreeMap<u32, u32> = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("EGRESS priority mappings:"))
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|m| {
            m.split_once(':').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        })
        .collect();
    let mut did = vec!["ip".to_string()];
    if let Some(ns) = &t.netns {
        did.extend(["-n".to_string(), ns.clone()]);
    }
    did.extend([
        "link".into(),
        "set".into(),
        v.to_string(),
        "type".into(),
        "vlan".into(),
        "egress-qos-map".into(),
    ]);
    let mut undo = did.clone();
    did.extend(map);
    undo.extend((0..8).map(|i| format!("{i}:{}", old.get(&i).copied().unwrap_or(0))));
    Action::Command { did, undo }
}

/// The root qdisc for real-time traffic on the NIC: `kinds` as alternatives, in order (the
/// first the kernel takes is kept); only the kernel's default root qdisc is replaced, and
/// restore deletes rtlab's. `etf_delta_us`: etf's delta.
fn qdisc_step(
    host: &dyn Host,
    t: &Target,
    nic: Option<&str>,
    kinds: &[String],
    etf_delta_us: i64,
) -> Step {
    let Some(nic) = nic else { return Step::skip("qdisc", "no NIC (give --nic)") };
    let what = format!("{nic}: root qdisc for RT traffic ({})", kinds.join(" or "));
    let shown = host.run(&tc(&t.netns, &["qdisc", "show", "dev", nic]));
    let current = match &shown {
        Ok(s) => s.lines().find(|l| l.contains(" root ")).unwrap_or("").to_string(),
        Err(e) => return Step::skip(what, format!("cannot read the qdisc: {e}")),
    };
    let w: Vec<&str> = current.split_whitespace().collect();
    let (kind, handle) = (w.get(1).copied().unwrap_or(""), w.get(2).copied().unwrap_or(""));
    if !host.is_fake() && !current.is_empty() && handle != "0:" {
        return Step::skip(what, format!("{nic} has a configured root qdisc ({kind} {handle}): rtlab replaces only the kernel's default"));
    }
    let undo = tc(&t.netns, &["qdisc", "del", "dev", nic, "root"]);
    let mut alts = Vec::new();
    for k in kinds {
        match k.as_str() {
            "mqprio" => alts.push((
                "mqprio (S1: SKB priority 4 -> queue 0, 2-3 -> queue 1, the rest -> queue 2)".to_string(),
                vec![Action::Command {
                    did: tc(&t.netns, &["qdisc", "replace", "dev", nic, "root", "mqprio", "num_tc", "3", "map", "2", "2", "1", "1", "0", "2", "2", "2", "2", "2", "2", "2", "2", "2", "2", "2", "queues", "1@0", "1@1", "1@2", "hw", "0"]),
                    undo: undo.clone(),
                }],
            )),
            "etf" => alts.push((
                format!("etf: launch times (SO_TXTIME, CLOCK_TAI) honoured in software, each datagram released {etf_delta_us} us before its time (etf_delta_us; one released after its time is dropped); as the root qdisc it drops every packet without a launch time (ARP included: give the neighbours static entries), so on a multi-queue NIC it belongs under the probe's queue"),
                vec![Action::Command {
                    did: tc(&t.netns, &["qdisc", "replace", "dev", nic, "root", "etf", "clockid", "CLOCK_TAI", "delta", &(etf_delta_us * 1000).to_string()]),
                    undo: undo.clone(),
                }],
            )),
            "taprio" => alts.push((
                "taprio (802.1Qbv in software): a 1 ms cycle whose first 250 us are open only to SKB priority 4 (traffic class 0, queue 0), the other 750 us only to the rest (class 1, queue 1); needs a device with 2 tx queues".to_string(),
                vec![Action::Command {
                    did: tc(&t.netns, &["qdisc", "replace", "dev", nic, "parent", "root", "handle", "100", "taprio", "num_tc", "2", "map", "1", "1", "1", "1", "0", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "1", "queues", "1@0", "1@1", "base-time", "0", "sched-entry", "S", "01", "250000", "sched-entry", "S", "02", "750000", "clockid", "CLOCK_TAI"]),
                    undo: undo.clone(),
                }],
            )),
            "htb" => alts.push((
                "htb: SO_PRIORITY 0x10001 (class 1:1) served first (prio 0), everything else class 1:2".to_string(),
                vec![
                    Action::Command { did: tc(&t.netns, &["qdisc", "replace", "dev", nic, "root", "handle", "1:", "htb", "default", "2"]), undo: undo.clone() },
                    Action::Command {
                        did: tc(&t.netns, &["class", "add", "dev", nic, "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit", "prio", "0"]),
                        undo: tc(&t.netns, &["class", "del", "dev", nic, "classid", "1:1"]),
                    },
                    Action::Command {
                        did: tc(&t.netns, &["class", "add", "dev", nic, "parent", "1:", "classid", "1:2", "htb", "rate", "10gbit", "prio", "1"]),
                        undo: tc(&t.netns, &["class", "del", "dev", nic, "classid", "1:2"]),
                    },
                ],
            )),
            _ => alts.push((
                "pfifo_fast: fixed priomap, SO_PRIORITY 6 and 7 -> band 0 (served first)".to_string(),
                vec![Action::Command { did: tc(&t.netns, &["qdisc", "replace", "dev", nic, "root", "pfifo_fast"]), undo: undo.clone() }],
            )),
        }
    }
    Step { what, alternatives: alts, skip: None, note: None, report: None }
        .note(format!("was: {}", if current.is_empty() { "none" } else { current.trim() }))
}
