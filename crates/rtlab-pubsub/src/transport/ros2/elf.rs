//! The libraries a shared object names (`DT_NEEDED`), read from its ELF file, and the
//! closure of a few libraries over the directories of a ROS 2 installation, in the order a
//! loader must load them (every library after the ones it needs).
//!
//! Why: a ROS 2 installation's libraries find each other through `LD_LIBRARY_PATH` (what
//! `source setup.bash` sets) or, in the package registry's wheels, through a Python start-up
//! hook; rtlab's process has neither, and a process cannot change its own library search
//! path. Loading each library of the closure by its full path, dependencies first, makes
//! every later lookup by name (the RMW's, the type supports') find it already loaded.
//!
//! Pure file reading: ELF64 and ELF32, either byte order; a file that is not ELF, or is cut
//! short, is an error naming it, never a panic.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The sonames `path` needs, in its dynamic section's order.
pub fn needed(path: &Path) -> Result<Vec<String>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    needed_in(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

struct Reader<'a> {
    b: &'a [u8],
    le: bool,
    wide: bool,
}

impl Reader<'_> {
    fn u16(&self, at: usize) -> Result<u16, String> {
        let s: [u8; 2] = self.get(at, 2)?.try_into().unwrap();
        Ok(if self.le { u16::from_le_bytes(s) } else { u16::from_be_bytes(s) })
    }
    fn u32(&self, at: usize) -> Result<u32, String> {
        let s: [u8; 4] = self.get(at, 4)?.try_into().unwrap();
        Ok(if self.le { u32::from_le_bytes(s) } else { u32::from_be_bytes(s) })
    }
    fn u64(&self, at: usize) -> Result<u64, String> {
        let s: [u8; 8] = self.get(at, 8)?.try_into().unwrap();
        Ok(if self.le { u64::from_le_bytes(s) } else { u64::from_be_bytes(s) })
    }
    /// An address-sized field (8 bytes in ELF64, 4 in ELF32).
    fn word(&self, at: usize) -> Result<u64, String> {
        if self.wide {
            self.u64(at)
        } else {
            self.u32(at).map(u64::from)
        }
    }
    fn get(&self, at: usize, n: usize) -> Result<&[u8], String> {
        at.checked_add(n)
            .and_then(|end| self.b.get(at..end))
            .ok_or_else(|| "cut short (not a whole ELF file)".to_string())
    }
}

fn usize_of(v: u64) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| "an offset beyond this machine's address space".to_string())
}

/// ELF `e_machine` values rtlab is built for.
pub const EM_X86_64: u16 = 62;
/// ELF `e_machine` of 64-bit ARM.
pub const EM_AARCH64: u16 = 183;

/// The `e_machine` of this rtlab's own build (what every library it loads must be), on the
/// machines rtlab is built and tested for.
#[cfg(target_arch = "x86_64")]
pub const THIS_MACHINE: Option<u16> = Some(EM_X86_64);
/// The `e_machine` of this rtlab's own build (what every library it loads must be).
#[cfg(target_arch = "aarch64")]
pub const THIS_MACHINE: Option<u16> = Some(EM_AARCH64);
/// The `e_machine` of this rtlab's own build: not one rtlab names (the loader says then).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub const THIS_MACHINE: Option<u16> = None;

/// A machine's name as `uname -m` and the Debian triplets say it.
pub fn machine_name(m: u16) -> String {
    match m {
        EM_X86_64 => "x86-64".into(),
        EM_AARCH64 => "aarch64".into(),
        3 => "i386".into(),
        40 => "arm (32-bit)".into(),
        243 => "riscv".into(),
        m => format!("ELF machine {m}"),
    }
}

/// The machine (`e_machine`) the ELF file of these bytes is built for.
pub fn machine_in(b: &[u8]) -> Result<u16, String> {
    if b.len() < 20 || &b[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let s = [b[18], b[19]];
    Ok(match b[5] {
        2 => u16::from_be_bytes(s),
        _ => u16::from_le_bytes(s),
    })
}

/// [`needed`] over the bytes of an ELF file.
pub fn needed_in(b: &[u8]) -> Result<Vec<String>, String> {
    if b.len() < 16 || &b[..4] != b"\x7fELF" {
        return Err("not an ELF file".into());
    }
    let wide = match b[4] {
        1 => false,
        2 => true,
        c => return Err(format!("ELF class {c} unknown")),
    };
    let le = match b[5] {
        1 => true,
        2 => false,
        d => return Err(format!("ELF data encoding {d} unknown")),
    };
    let r = Reader { b, le, wide };
    // section headers: offset, entry size, count
    let (shoff, shentsize, shnum) = if wide {
        (r.u64(0x28)?, r.u16(0x3a)?, r.u16(0x3c)?)
    } else {
        (u64::from(r.u32(0x20)?), r.u16(0x2e)?, r.u16(0x30)?)
    };
    let section = |i: u64| -> Result<(u32, u64, u64, u32, u64), String> {
        // (type, offset, size, link, entry size)
        let at = usize_of(shoff + i * u64::from(shentsize))?;
        if wide {
            Ok((
                r.u32(at + 4)?,
                r.u64(at + 0x18)?,
                r.u64(at + 0x20)?,
                r.u32(at + 0x28)?,
                r.u64(at + 0x38)?,
            ))
        } else {
            Ok((
                r.u32(at + 4)?,
                u64::from(r.u32(at + 0x10)?),
                u64::from(r.u32(at + 0x14)?),
                r.u32(at + 0x18)?,
                u64::from(r.u32(at + 0x24)?),
            ))
        }
    };
    const SHT_DYNAMIC: u32 = 6;
    const DT_NULL: u64 = 0;
    const DT_NEEDED: u64 = 1;
    let mut out = Vec::new();
    for i in 0..u64::from(shnum) {
        let (kind, off, size, link, entsize) = section(i)?;
        if kind != SHT_DYNAMIC {
            continue;
        }
        let (_, str_off, str_size, _, _) = section(u64::from(link))?;
        let strings = r.get(usize_of(str_off)?, usize_of(str_size)?)?;
        let step = if entsize > 0 {
            entsize
        } else if wide {
            16
        } else {
            8
        };
        let mut at = 0;
        while at + step <= size {
            let e = usize_of(off + at)?;
            let tag = r.word(e)?;
            if tag == DT_NULL {
                break;
            }
            if tag == DT_NEEDED {
                let v = usize_of(r.word(e + if wide { 8 } else { 4 })?)?;
                let s = strings.get(v..).ok_or("a name outside its string table")?;
                let end = s.iter().position(|c| *c == 0).ok_or("an unterminated name")?;
                out.push(String::from_utf8_lossy(&s[..end]).into_owned());
            }
            at += step;
        }
    }
    Ok(out)
}

/// The libraries `roots` need, found in `dirs` (first match wins), each after the libraries
/// it needs: the order to load them in. A soname found in none of `dirs` is left to the
/// system's loader (libc, libstdc++, a library of the system) and not listed. Cycles
/// (rare, legal) are cut where they close.
pub fn closure(roots: &[PathBuf], dirs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut found: BTreeMap<String, Option<PathBuf>> = BTreeMap::new();
    let mut find = |soname: &str| -> Option<PathBuf> {
        found
            .entry(soname.to_string())
            .or_insert_with(|| dirs.iter().map(|d| d.join(soname)).find(|p| p.is_file()))
            .clone()
    };
    let mut order = Vec::new();
    let mut done: BTreeSet<PathBuf> = BTreeSet::new();
    let mut on_path: BTreeSet<PathBuf> = BTreeSet::new();
    // depth first, iteratively: (library, its needed libraries still to visit)
    for root in roots {
        if done.contains(root) {
            continue;
        }
        let mut stack: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
        let kids = |p: &Path, find: &mut dyn FnMut(&str) -> Option<PathBuf>| {
            needed(p).map(|n| n.iter().filter_map(|s| find(s)).rev().collect::<Vec<_>>())
        };
        stack.push((root.clone(), kids(root, &mut find)?));
        on_path.insert(root.clone());
        loop {
            let next = match stack.last_mut() {
                None => break,
                Some((_, rest)) => rest.pop(),
            };
            match next {
                Some(k) if done.contains(&k) || on_path.contains(&k) => {}
                Some(k) => {
                    let ks = kids(&k, &mut find)?;
                    on_path.insert(k.clone());
                    stack.push((k, ks));
                }
                None => {
                    let (lib, _) = stack.pop().expect("not empty: its top was just read");
                    on_path.remove(&lib);
                    done.insert(lib.clone());
                    order.push(lib);
                }
            }
        }
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 LE file whose dynamic section needs `names`.
    fn elf(names: &[&str]) -> Vec<u8> {
        let mut strtab = vec![0u8];
        let mut offs = Vec::new();
        for n in names {
            offs.push(strtab.len() as u64);
            strtab.extend_from_slice(n.as_bytes());
            strtab.push(0);
        }
        let mut dynamic = Vec::new();
        for o in &offs {
            dynamic.extend_from_slice(&1u64.to_le_bytes());
            dynamic.extend_from_slice(&o.to_le_bytes());
        }
        dynamic.extend_from_slice(&[0u8; 16]);
        let (dyn_off, str_off) = (64u64, 64 + dynamic.len() as u64);
        let shoff = str_off + strtab.len() as u64;
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        b.extend_from_slice(&dynamic);
        b.extend_from_slice(&strtab);
        let sh = |kind: u32, off: u64, size: u64, link: u32, ent: u64| {
            let mut s = vec![0u8; 64];
            s[4..8].copy_from_slice(&kind.to_le_bytes());
            s[0x18..0x20].copy_from_slice(&off.to_le_bytes());
            s[0x20..0x28].copy_from_slice(&size.to_le_bytes());
            s[0x28..0x2c].copy_from_slice(&link.to_le_bytes());
            s[0x38..0x40].copy_from_slice(&ent.to_le_bytes());
            s
        };
        b.extend(sh(0, 0, 0, 0, 0));
        b.extend(sh(6, dyn_off, dynamic.len() as u64, 2, 16));
        b.extend(sh(3, str_off, strtab.len() as u64, 0, 0));
        b
    }

    #[test]
    fn the_machine_is_read_from_the_header() {
        let mut b = elf(&["liba.so"]);
        b[18..20].copy_from_slice(&EM_AARCH64.to_le_bytes());
        assert_eq!(machine_in(&b).unwrap(), EM_AARCH64);
        b[18..20].copy_from_slice(&EM_X86_64.to_le_bytes());
        assert_eq!(machine_in(&b).unwrap(), EM_X86_64);
        assert_eq!(machine_name(EM_AARCH64), "aarch64");
        assert_eq!(machine_name(7), "ELF machine 7");
        assert!(machine_in(b"\x7fELF").unwrap_err().contains("not an ELF"));
        // this test binary itself is built for this build's machine
        let me = std::env::current_exe().unwrap();
        assert_eq!(Some(machine_in(&std::fs::read(me).unwrap()).unwrap()), THIS_MACHINE);
    }

    #[test]
    fn needed_names_come_out_in_order() {
        assert_eq!(needed_in(&elf(&["liba.so", "libb.so.2"])).unwrap(), ["liba.so", "libb.so.2"]);
        assert_eq!(needed_in(&elf(&[])).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn this_machines_libc_users_name_libc() {
        // a real file: the test binary itself is an ELF executable that needs libc
        let me = std::env::current_exe().unwrap();
        assert!(needed(&me).unwrap().iter().any(|n| n.starts_with("libc.so")));
    }

    #[test]
    fn not_elf_and_cut_short_are_errors_not_panics() {
        assert!(needed_in(b"#!/bin/sh\n").unwrap_err().contains("not an ELF"));
        let whole = elf(&["liba.so"]);
        for cut in [17, 64, 80, whole.len() - 1] {
            assert!(needed_in(&whole[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn the_closure_lists_dependencies_first_and_leaves_system_libraries_out() {
        let d = tempfile::tempdir().unwrap();
        let w = |n: &str, needs: &[&str]| std::fs::write(d.path().join(n), elf(needs)).unwrap();
        // top -> mid -> base; top -> base; base -> libc (not here); mid <-> cyc (a cycle)
        w("libtop.so", &["libmid.so", "libbase.so"]);
        w("libmid.so", &["libbase.so", "libcyc.so"]);
        w("libcyc.so", &["libmid.so"]);
        w("libbase.so", &["libc.so.6"]);
        let dirs = vec![d.path().to_path_buf()];
        let order = closure(&[d.path().join("libtop.so")], &dirs).unwrap();
        let names: Vec<String> =
            order.iter().map(|p| p.file_name().unwrap().to_string_lossy().into()).collect();
        assert_eq!(names.len(), 4, "{names:?}");
        let at = |n: &str| names.iter().position(|x| x == n).unwrap();
        assert!(at("libbase.so") < at("libmid.so"));
        assert!(at("libmid.so") < at("libtop.so"));
        assert_eq!(names.last().unwrap(), "libtop.so");
    }
}
