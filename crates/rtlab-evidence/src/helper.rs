//! How the evidence's helper threads (the counter sampler, the spike watcher and its
//! reader) keep out of the probe's way.
//!
//! Contract: called at the start of a helper thread, never on a measuring one.

/// Run the calling (helper) thread SCHED_OTHER and off `cpus` (the probe's), when another
/// CPU is online: on a kernel without full preemption, a read of /proc/interrupts on the
/// probe's CPU holds it for as long as the read takes, whatever the priorities.
pub(crate) fn stay_off(cpus: &[usize]) {
    let _ = rtlab_sys::sched::set_current_policy(rtlab_sys::sched::Policy::Other, 0);
    if cpus.is_empty() {
        return;
    }
    let (online, _) = rtlab_sys::cpus::online_cpus(std::path::Path::new("/"));
    let rest: Vec<usize> = online.into_iter().filter(|c| !cpus.contains(c)).collect();
    if !rest.is_empty() {
        let _ = rtlab_sys::sched::set_current_affinity(&rest);
    }
}
