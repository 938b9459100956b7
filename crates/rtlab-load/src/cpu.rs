//! CPU time counters of /proc/stat, to say how busy the CPUs were while a load ran.
//!
//! Contract: a missing or unreadable /proc/stat gives zeros, never an error (the load's
//! report then shows 0 % busy). See proc(5), /proc/stat.

/// CPU time counters of /proc/stat (jiffies): total and busy, for all CPUs and per CPU.
#[derive(Clone, Debug, Default)]
pub struct CpuTimes {
    /// (total, busy) over all CPUs.
    pub all: (u64, u64),
    /// (total, busy) per CPU, in the order of /proc/stat.
    pub per_cpu: Vec<(u64, u64)>,
}

impl CpuTimes {
    /// Read /proc/stat under `root`.
    pub fn read(root: &std::path::Path) -> CpuTimes {
        let text = std::fs::read_to_string(root.join("proc/stat")).unwrap_or_default();
        let mut t = CpuTimes::default();
        for l in text.lines().filter(|l| l.starts_with("cpu")) {
            let mut w = l.split_whitespace();
            let name = w.next().unwrap_or("");
            let v: Vec<u64> = w.map(|x| x.parse().unwrap_or(0)).collect();
            // user nice system idle iowait irq softirq steal (guest counted in user)
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            if name == "cpu" {
                t.all = (total, total.saturating_sub(idle));
            } else {
                t.per_cpu.push((total, total.saturating_sub(idle)));
            }
        }
        t
    }

    /// Busy percent between `self` (earlier) and `later`: (all CPUs, per CPU).
    pub fn busy_percent(&self, later: &CpuTimes) -> (f64, Vec<f64>) {
        let pct = |a: (u64, u64), b: (u64, u64)| {
            let dt = b.0.saturating_sub(a.0);
            if dt == 0 {
                0.0
            } else {
                (b.1.saturating_sub(a.1)) as f64 * 100.0 / dt as f64
            }
        };
        (
            pct(self.all, later.all),
            self.per_cpu.iter().zip(&later.per_cpu).map(|(a, b)| pct(*a, *b)).collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_times_give_percentages() {
        let a = CpuTimes { all: (1000, 100), per_cpu: vec![(500, 0), (500, 100)] };
        let b = CpuTimes { all: (2000, 600), per_cpu: vec![(1000, 500), (1000, 100)] };
        let (all, per) = a.busy_percent(&b);
        assert_eq!(all, 50.0);
        assert_eq!(per, vec![100.0, 0.0]);
    }

    #[test]
    fn cpu_times_are_read_from_a_tree() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("proc")).unwrap();
        std::fs::write(
            d.path().join("proc/stat"),
            "cpu  10 0 10 70 10 0 0 0 0 0\ncpu0 5 0 5 35 5 0 0 0 0 0\nintr 1\n",
        )
        .unwrap();
        let t = CpuTimes::read(d.path());
        assert_eq!(t.all, (100, 20));
        assert_eq!(t.per_cpu, vec![(50, 10)]);
        assert_eq!(CpuTimes::read(&d.path().join("none")).all, (0, 0));
    }
}
