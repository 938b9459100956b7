//! rtlab-tune: real-time profiles with a journal that always restores, machine checks and
//! the machine lock (spike evidence is rtlab-evidence's, loads are rtlab-load's).
//!
//! Contract: every system change goes through a [`session::Session`], which journals it
//! (fsync'd) before making it and puts it back on drop, on panic, or later through
//! [`journal::restore_journal`] after a kill -9. Everything takes a [`host::Host`], so the
//! logic is tested against a fake sysfs/procfs tree without root. Nothing here prints
//! (except the restore guard's last-resort line while a panic unwinds).
//!
//! Profiles come from one registry ([`profile::builtin_names`], [`profile::resolve`]);
//! [`journal::pending`] says whether a journal (of a dead rtlab, or a live one) is still in
//! force; [`lock::MachineLock`] keeps one measurement at a time per machine. Errors are
//! typed (thiserror); each error that a machine's lack can cause has `missing()`, Some for
//! a missing privilege, kernel feature or tool (the lab skips such a case instead of failing).

#![forbid(unsafe_code)]

pub mod check;
pub mod host;
pub mod journal;
pub mod lock;
pub mod profile;
pub mod session;
pub mod snapshot;
pub mod testing;

/// A CPU list the way the kernel writes it (`0-3,8`).
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", v[i], v[j]) } else { v[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

/// A CPU mask as /proc/irq/N/smp_affinity wants it (hex, comma every 32 bits).
pub fn cpu_mask(cpus: &[usize]) -> String {
    let max = cpus.iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; max / 32 + 1];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    let mut parts: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
    parts[0] = format!("{:x}", words[words.len() - 1]);
    parts.join(",")
}

/// Parse a /proc/irq/N/smp_affinity mask.
pub fn parse_cpu_mask(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for (wi, word) in s.trim().split(',').rev().enumerate() {
        let w = u32::from_str_radix(word.trim(), 16).unwrap_or(0);
        for b in 0..32 {
            if w & (1 << b) != 0 {
                out.push(wi * 32 + b);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_and_masks() {
        assert_eq!(cpu_list(&[3, 0, 1, 2, 8]), "0-3,8");
        assert_eq!(cpu_mask(&[1]), "2");
        assert_eq!(cpu_mask(&[0, 1]), "3");
        assert_eq!(cpu_mask(&[33]), "2,00000000");
        assert_eq!(parse_cpu_mask("2,00000001"), vec![0, 33]);
        assert_eq!(parse_cpu_mask("3"), vec![0, 1]);
    }
}
