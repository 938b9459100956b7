//! CPU lists as the kernel writes them (`0-3,8,10-11`), and the online CPUs.

use std::path::Path;

/// Parse a kernel CPU list. Err names the piece that is not a CPU number or range.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("'{part}' is not a CPU number or range like 0-3");
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if b < a {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The online CPUs under `root` (`/` on a real machine) and the raw list text.
pub fn online_cpus(root: &Path) -> (Vec<usize>, String) {
    let text =
        std::fs::read_to_string(root.join("sys/devices/system/cpu/online")).unwrap_or_default();
    let text = text.trim().to_string();
    match parse_cpu_list(&text) {
        Ok(v) if !v.is_empty() => (v, text),
        _ => {
            let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
            ((0..n).collect(), format!("0-{}", n - 1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("1,1,0").unwrap(), vec![0, 1]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").unwrap_err().contains("'a'"));
    }
}
