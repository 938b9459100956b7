//! Holding /dev/cpu_dma_latency (PM QoS): keeps CPUs out of deep idle states while held.
//!
//! Contract: the request lasts while the file stays open; the kernel drops it when the
//! file is closed — on Drop, on exit and after a crash alike, so no journal is needed.
//! (Documentation/power/pm_qos_interface.rst)

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

/// An open, written /dev/cpu_dma_latency.
#[derive(Debug)]
pub struct CpuDmaLatency {
    _file: File,
    pub value_us: i32,
}

impl CpuDmaLatency {
    /// Hold `value_us` (0: no C-state exit latency allowed) on `path` (normally /dev/cpu_dma_latency).
    pub fn hold(path: &Path, value_us: i32) -> std::io::Result<CpuDmaLatency> {
        let mut f = OpenOptions::new().read(true).write(true).open(path)?;
        f.write_all(&value_us.to_ne_bytes())?;
        Ok(CpuDmaLatency { _file: f, value_us })
    }

    /// The value in force now (the minimum of every holder's request).
    pub fn current(path: &Path) -> std::io::Result<i32> {
        let mut b = [0u8; 4];
        File::open(path)?.read_exact(&mut b)?;
        Ok(i32::from_ne_bytes(b))
    }
}
