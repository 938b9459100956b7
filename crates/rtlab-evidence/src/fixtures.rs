//! Fixtures of the evidence's unit tests: ftrace text around spikes, the tables `rtla
//! timerlat top` prints, and a fake tracefs with the osnoise settings rtla changes.

use std::path::Path;

/// A timer thread woken on CPU 1 while rustc runs, held by rustc and a NET_RX softirq in
/// ksoftirqd, and the spike marked.
pub const TRACE: &str = "# tracer: nop
#
          <idle>-0       [001] d..2.   100.000000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rustc next_pid=812 next_prio=120
           rustc-812     [001] d.h1.   100.001000: irq_handler_entry: irq=38 name=virtio2-input.0
           rustc-812     [001] d.h1.   100.001100: irq_handler_exit: irq=38 ret=handled
           rustc-812     [001] d.h2.   100.002000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
           rustc-812     [001] d..2.   100.006700: sched_switch: prev_comm=rustc prev_pid=812 prev_prio=120 prev_state=R ==> next_comm=ksoftirqd/1 next_pid=22 next_prio=120
     ksoftirqd/1-22      [001] ..s1.   100.006710: softirq_entry: vec=3 [action=NET_RX]
     ksoftirqd/1-22      [001] ..s1.   100.009910: softirq_exit: vec=3 [action=NET_RX]
     ksoftirqd/1-22      [001] d..2.   100.010000: sched_switch: prev_comm=ksoftirqd/1 prev_pid=22 prev_prio=120 prev_state=S ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
    rtlab-timer0-900     [001] d..2.   100.010050: sched_switch: prev_comm=rtlab-timer0 prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
    rtlab-timer0-900     [000] .....   100.011000: tracing_mark_write: rtlab spike 1: sample 5 late by 8100000 ns
";

/// A host stall (CPU 1 idle, nothing at all there for 9.4 ms, then the timer thread's
/// wake-up), spike 1 marked, the flag re-armed, then a FIFO hog holding the woken thread
/// for 19 ms, spike 2 marked.
pub const TWO_SPIKES: &str = "          <idle>-0       [001] d..2.   400.000000: sched_switch: prev_comm=rtlab-timer0 prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
          <idle>-0       [001] dNh4.   400.009400: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
          <idle>-0       [001] d..2.   400.009410: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
 rtlab-spikewatc-990     [000] .....   400.010000: tracing_mark_write: rtlab spike 1: sample 9 late by 9410000 ns
    rtlab-timer0-900     [001] d..2.   400.010010: sched_switch: prev_comm=rtlab-timer0 prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
 rtlab-spikewatc-990     [000] .....   400.015000: tracing_mark_write: rtlab spike 1: re-armed
          <idle>-0       [001] d..2.   400.100000: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rtlab-hog next_pid=950 next_prio=9
       rtlab-hog-950     [001] dNh4.   400.101000: sched_wakeup: comm=rtlab-timer0 pid=900 prio=19 target_cpu=001
       rtlab-hog-950     [001] d..2.   400.120000: sched_switch: prev_comm=rtlab-hog prev_pid=950 prev_prio=9 prev_state=X ==> next_comm=rtlab-timer0 next_pid=900 next_prio=19
 rtlab-spikewatc-990     [000] .....   400.121000: tracing_mark_write: rtlab spike 2: sample 120 late by 19000000 ns
";

/// The example of Documentation/tools/rtla/rtla-timerlat-top.rst as of v6.1 (torvalds/
/// linux; installed by Debian's rtla 6.1 as rtla-timerlat-top(1)): `rtla timerlat top -s
/// 30 -T 30 -t`, the plain table of rtla 6.1 (no auto-analysis). The "<--- CPU with
/// spike" note is the document's.
pub const DOC_61: &str = "                 Timer Latency
  0 00:00:59   |          IRQ Timer Latency (us)        |         Thread Timer Latency (us)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max
  0 #58634     |        1         0         1        10 |       11         2        10        23
  1 #58634     |        1         0         1         9 |       12         2         9        23
  2 #58634     |        0         0         1        11 |       10         2         9        23
  3 #58634     |        1         0         1        11 |       11         2         9        24
  4 #58634     |        1         0         1        10 |       11         2         9        26
  5 #58634     |        1         0         1         8 |       10         2         9        25
  6 #58634     |       12         0         1        12 |       30         2        10        30 <--- CPU with spike
  7 #58634     |        1         0         1         9 |       11         2         9        23
  8 #58633     |        1         0         1         9 |       11         2         9        26
  9 #58633     |        1         0         1         9 |       10         2         9        26
 10 #58633     |        1         0         1        13 |       11         2         9        28
 11 #58633     |        1         0         1        13 |       12         2         9        24
 12 #58633     |        1         0         1         8 |       10         2         9        23
 13 #58633     |        1         0         1        10 |       10         2         9        22
 14 #58633     |        1         0         1        18 |       12         2         9        27
 15 #58633     |        1         0         1        10 |       11         2         9        28
 16 #58633     |        0         0         1        11 |        7         2         9        26
 17 #58633     |        1         0         1        13 |       10         2         9        24
 18 #58633     |        1         0         1         9 |       13         2         9        22
 19 #58633     |        1         0         1        10 |       11         2         9        23
 20 #58633     |        1         0         1        12 |       11         2         9        28
 21 #58633     |        1         0         1        14 |       11         2         9        24
 22 #58633     |        1         0         1         8 |       11         2         9        22
 23 #58633     |        1         0         1        10 |       11         2         9        27
timerlat hit stop tracing
saving trace to timerlat_trace.txt
";

/// The example of Documentation/tools/rtla/rtla-timerlat-top.rst (torvalds/linux, current):
/// `timerlat -a 40 -c 1-23 -q`, with the auto-analysis of rtla >= 6.3 (the document's
/// two-space literal-block indent removed). Documentation/tools/rtla/rtla-timerlat.rst
/// has no example output.
pub const DOC_AA: &str = "                                     Timer Latency
  0 00:00:12   |          IRQ Timer Latency (us)        |         Thread Timer Latency (us)
CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max
  1 #12322     |        0         0         1        15 |       10         3         9        31
  2 #12322     |        3         0         1        12 |       10         3         9        23
  3 #12322     |        1         0         1        21 |        8         2         8        34
  4 #12322     |        1         0         1        17 |       10         2        11        33
  5 #12322     |        0         0         1        12 |        8         3         8        25
  6 #12322     |        1         0         1        14 |       16         3        11        35
  7 #12322     |        0         0         1        14 |        9         2         8        29
  8 #12322     |        1         0         1        22 |        9         3         9        34
  9 #12322     |        0         0         1        14 |        8         2         8        24
 10 #12322     |        1         0         0        12 |        9         3         8        24
 11 #12322     |        0         0         0        15 |        6         2         7        29
 12 #12321     |        1         0         0        13 |        5         3         8        23
 13 #12319     |        0         0         1        14 |        9         3         9        26
 14 #12321     |        1         0         0        13 |        6         2         8        24
 15 #12321     |        1         0         1        15 |       12         3        11        27
 16 #12318     |        0         0         1        13 |        7         3        10        24
 17 #12319     |        0         0         1        13 |       11         3         9        25
 18 #12318     |        0         0         0        12 |        8         2         8        20
 19 #12319     |        0         0         1        18 |       10         2         9        28
 20 #12317     |        0         0         0        20 |        9         3         8        34
 21 #12318     |        0         0         0        13 |        8         3         8        28
 22 #12319     |        0         0         1        11 |        8         3        10        22
 23 #12320     |       28         0         1        28 |       41         3        11        41
rtla timerlat hit stop tracing
## CPU 23 hit stop tracing, analyzing it ##
IRQ handler delay:                                        27.49 us (65.52 %)
IRQ latency:                                              28.13 us
Timerlat IRQ duration:                                     9.59 us (22.85 %)
Blocking thread:                                           3.79 us (9.03 %)
                       objtool:49256                       3.79 us
  Blocking thread stacktrace
              -> timerlat_irq
              -> __hrtimer_run_queues
              -> hrtimer_interrupt
              -> __sysvec_apic_timer_interrupt
              -> sysvec_apic_timer_interrupt
              -> asm_sysvec_apic_timer_interrupt
              -> _raw_spin_unlock_irqrestore
              -> cgroup_rstat_flush_locked
              -> cgroup_rstat_flush_irqsafe
              -> mem_cgroup_flush_stats
              -> mem_cgroup_wb_stats
              -> balance_dirty_pages
              -> balance_dirty_pages_ratelimited_flags
              -> btrfs_buffered_write
              -> btrfs_do_write_iter
              -> vfs_write
              -> __x64_sys_pwrite64
              -> do_syscall_64
              -> entry_SYSCALL_64_after_hwframe
------------------------------------------------------------------------
  Thread latency:                                          41.96 us (100%)

The system has exit from idle latency!
  Max timerlat IRQ latency from idle: 17.48 us in cpu 4
Saving trace to timerlat_trace.txt
";

/// A tracefs with `available_tracers` = `tracers`, the osnoise settings rtla writes and an
/// empty `instances/`.
pub fn fake_tracefs(root: &Path, tracers: &str) {
    rtlab_host::testing::put(root, "sys/kernel/tracing/available_tracers", tracers);
    for (f, v) in [
        ("cpus", "0-1\n"),
        ("timerlat_period_us", "1000\n"),
        ("stop_tracing_us", "0\n"),
        ("stop_tracing_total_us", "0\n"),
        ("print_stack", "0\n"),
    ] {
        rtlab_host::testing::put(root, &format!("sys/kernel/tracing/osnoise/{f}"), v);
    }
    rtlab_host::testing::put(
        root,
        "sys/kernel/tracing/osnoise/options",
        "DEFAULTS OSNOISE_WORKLOAD NO_OSNOISE_PANIC_ON_STOP\n",
    );
    std::fs::create_dir_all(root.join("sys/kernel/tracing/instances")).unwrap();
}

/// rtla timerlat's defaults, for 30 s.
pub fn timerlat_config() -> crate::timerlat::TimerlatConfig {
    crate::timerlat::TimerlatConfig {
        duration: std::time::Duration::from_secs(30),
        ..crate::timerlat::TimerlatConfig::default()
    }
}
