//! rtlab-host: the machine's file tree as rtlab reads and changes it, below tuning and
//! evidence alike: [`host`] (the real machine or a fake tree; its tasks, its mounts),
//! [`journal`] (every change written down before it is made, restored after a crash),
//! [`session`] (changes made through the journal and put back), [`snapshot`] (the state a
//! run measured under), [`lock`] (one measuring rtlab per machine), and the CPU list and mask
//! words of sysfs and procfs.
//!
//! Contract: every change to the machine goes through a [`session::Session`], which journals
//! it first; nothing here prints.

#![forbid(unsafe_code)]

pub mod host;
pub mod journal;
pub mod lock;
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
