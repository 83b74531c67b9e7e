//! The function table of a Go executable's `.gopclntab`, which `go build -ldflags=-s`
//! keeps when it strips the symbol table: every function's name and address range, for
//! the names of a stripped Go program's frames and the runtime's functions its probes go
//! on. Written here because no maintained crate reads it; only the layout of Go 1.18 and
//! later (magic 0xfffffff0 and 0xfffffff1, the one that has `textStart`) is read.
//!
//! The header (`runtime.pcHeader`): magic (u32), two pad bytes, the instruction size
//! quantum, the pointer size, then pointer-sized `nfunc`, `nfiles`, `textStart`, and the
//! offsets of the function names, the compilation units, the file table, the pc tables
//! and the function table. The function table is `nfunc + 1` pairs of u32 (the entry's
//! offset from the start of the text, the `_func`'s offset in the table); a `_func` starts
//! with its entry offset (u32) and its name's offset in the names (i32).

use super::Symbol;

const MAGICS: [u32; 2] = [0xffff_fff0, 0xffff_fff1];

/// The functions of a `.gopclntab` whose text starts at `text` (the `.text` section's
/// address: the header's own `textStart` is zero in the file). Empty where the table is
/// not one this reads; never reads past the section.
pub(super) fn functions(table: &[u8], text: u64) -> Vec<Symbol> {
    read(table, text).unwrap_or_default()
}

fn read(t: &[u8], text: u64) -> Option<Vec<Symbol>> {
    let u32_at = |o: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            t.get(o..o.checked_add(4)?)?.try_into().ok()?,
        ))
    };
    if !MAGICS.contains(&u32_at(0)?) || *t.get(7)? != 8 {
        return None;
    }
    let word = |i: usize| -> Option<usize> {
        let o = 8 + 8 * i;
        usize::try_from(u64::from_le_bytes(t.get(o..o + 8)?.try_into().ok()?)).ok()
    };
    let (nfunc, names, functab) = (word(0)?, word(3)?, word(7)?);
    // Each function takes 8 bytes of the function table: a count the section cannot hold
    // is no table.
    if nfunc.checked_mul(8)? > t.len() {
        return None;
    }
    let mut out = Vec::with_capacity(nfunc);
    for i in 0..nfunc {
        let at = functab.checked_add(8 * i)?;
        let (entry, func) = (u32_at(at)?, u32_at(at + 4)?);
        let end = u32_at(at + 8)?;
        let record = functab.checked_add(func as usize)?;
        let name_off = i32::from_le_bytes(t.get(record + 4..record + 8)?.try_into().ok()?);
        let start = names.checked_add(usize::try_from(name_off).ok()?)?;
        let rest = t.get(start..)?;
        let len = rest.iter().position(|&b| b == 0)?;
        let Ok(name) = std::str::from_utf8(&rest[..len]) else {
            continue;
        };
        if end > entry {
            out.push(Symbol {
                start: text + u64::from(entry),
                end: text + u64::from(end),
                name: name.to_string(),
            });
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of two functions laid out as Go 1.20's linker lays it out.
    fn table() -> Vec<u8> {
        let mut t = vec![0u8; 72];
        t[..4].copy_from_slice(&0xffff_fff1u32.to_le_bytes());
        t[6] = 1;
        t[7] = 8;
        let names_at = 72u64;
        let names = b"main.main\0runtime.gopark\0";
        let functab_at = names_at + names.len() as u64;
        for (i, v) in [2u64, 0, 0, names_at, 0, 0, 0, functab_at]
            .iter()
            .enumerate()
        {
            t[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        t.extend_from_slice(names);
        // Three entries (two functions and the end), then the two `_func` records.
        let funcs_at: u32 = 3 * 8;
        for (entry, func) in [(0u32, funcs_at), (0x40, funcs_at + 8), (0x90, 0)] {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&func.to_le_bytes());
        }
        for (entry, name) in [(0u32, 0i32), (0x40, 10)] {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&name.to_le_bytes());
        }
        t
    }

    #[test]
    fn the_functions_of_a_go_table_are_named_with_their_ranges() {
        let f = functions(&table(), 0x401000);
        let got: Vec<(u64, u64, &str)> = f
            .iter()
            .map(|s| (s.start, s.end, s.name.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (0x401000, 0x401040, "main.main"),
                (0x401040, 0x401090, "runtime.gopark")
            ]
        );
    }

    #[test]
    fn a_cut_or_foreign_table_gives_nothing_and_never_reads_past_its_end() {
        let t = table();
        for len in 0..t.len() {
            // Every prefix: whatever it yields lies within the whole table's functions.
            assert!(functions(&t[..len], 0x401000).len() <= 2);
        }
        let mut other = t.clone();
        other[0] = 0xfb;
        assert!(functions(&other, 0x401000).is_empty());
        let mut huge = t;
        huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(functions(&huge, 0x401000).is_empty());
    }
}
