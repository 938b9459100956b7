//! The file offset of a dynamic symbol in an ELF64 shared object (what a uprobe is placed
//! at): `.dynsym` and its string table, and the loadable segment that holds the symbol.
//!
//! Contract: reads the file's bytes with every offset and size checked (a file that is not a
//! little-endian ELF64, or is cut short, is one line why); no unsafe, no mapping.

fn u16_at(b: &[u8], o: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?))
}

/// The file offsets of `names` in the ELF64 object `b` (None for one it does not define).
pub fn symbol_offsets(b: &[u8], names: &[&str]) -> Result<Vec<Option<u64>>, String> {
    if b.get(..4) != Some(b"\x7fELF") || b.get(4) != Some(&2) || b.get(5) != Some(&1) {
        return Err("not a little-endian 64-bit ELF object".into());
    }
    let cut = || "an ELF object cut short".to_string();
    let (phoff, shoff) =
        (u64_at(b, 32).ok_or_else(cut)? as usize, u64_at(b, 40).ok_or_else(cut)? as usize);
    let (phentsize, phnum) =
        (u16_at(b, 54).ok_or_else(cut)? as usize, u16_at(b, 56).ok_or_else(cut)? as usize);
    let (shentsize, shnum) =
        (u16_at(b, 58).ok_or_else(cut)? as usize, u16_at(b, 60).ok_or_else(cut)? as usize);
    // the loadable segments: (vaddr, offset, filesz)
    let mut loads = Vec::new();
    for i in 0..phnum {
        let p = phoff.checked_add(i.checked_mul(phentsize).ok_or_else(cut)?).ok_or_else(cut)?;
        if u32_at(b, p).ok_or_else(cut)? == 1 {
            let off = u64_at(b, p + 8).ok_or_else(cut)?;
            let vaddr = u64_at(b, p + 16).ok_or_else(cut)?;
            let filesz = u64_at(b, p + 32).ok_or_else(cut)?;
            loads.push((vaddr, off, filesz));
        }
    }
    // .dynsym (type 11) and its linked string table
    let section = |i: usize| -> Option<(u32, u64, u64, u32, u64)> {
        let s = shoff.checked_add(i.checked_mul(shentsize)?)?;
        Some((
            u32_at(b, s + 4)?,
            u64_at(b, s + 24)?,
            u64_at(b, s + 32)?,
            u32_at(b, s + 40)?,
            u64_at(b, s + 56)?,
        ))
    };
    let dynsym = (0..shnum)
        .filter_map(section)
        .find(|s| s.0 == 11)
        .ok_or("no dynamic symbol table (.dynsym)")?;
    let (_, str_off, str_size, ..) =
        section(dynsym.3 as usize).ok_or("the dynamic symbols' string table is missing")?;
    let strtab = b
        .get(str_off as usize..(str_off as usize).saturating_add(str_size as usize))
        .ok_or_else(cut)?;
    let entsize = if dynsym.4 == 0 { 24 } else { dynsym.4 as usize };
    let mut found = vec![None; names.len()];
    let count = dynsym.2 as usize / entsize.max(1);
    for i in 0..count {
        let e = (dynsym.1 as usize).checked_add(i * entsize).ok_or_else(cut)?;
        let (name, value, shndx) = (
            u32_at(b, e).ok_or_else(cut)? as usize,
            u64_at(b, e + 8).ok_or_else(cut)?,
            u16_at(b, e + 6).ok_or_else(cut)?,
        );
        if shndx == 0 || value == 0 {
            continue; // undefined here
        }
        let Some(rest) = strtab.get(name..) else { continue };
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        let Some(k) = names.iter().position(|n| n.as_bytes() == &rest[..end]) else { continue };
        found[k] = loads
            .iter()
            .find(|(v, _, sz)| (*v..v.saturating_add(*sz)).contains(&value))
            .map(|(v, off, _)| value - v + off);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_libc_function_where_nm_and_the_segments_put_it() {
        // this process's own libc: a real object with a .dynsym
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("libc.so"))
            .expect("libc mapped");
        let b = std::fs::read(libc).unwrap();
        let got = symbol_offsets(&b, &["clock_gettime", "not_a_symbol_here"]).unwrap();
        assert!(got[0].is_some_and(|o| o > 0 && (o as usize) < b.len()), "{got:?}");
        assert_eq!(got[1], None);
    }

    #[test]
    fn anything_else_is_one_line() {
        assert!(symbol_offsets(b"hello", &["x"]).unwrap_err().contains("ELF"));
        let mut b = b"\x7fELF\x02\x01\x01".to_vec();
        b.resize(40, 0);
        assert!(symbol_offsets(&b, &["x"]).unwrap_err().contains("cut short"));
        // a fuzz of truncations of a real object never panics
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("libc.so"))
            .unwrap();
        let real = std::fs::read(libc).unwrap();
        for cut in (0..real.len()).step_by(real.len() / 97 + 1) {
            let _ = symbol_offsets(&real[..cut], &["clock_gettime"]);
        }
    }
}
