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
use crate::sandbox::MAX_NAME;

const MAGICS: [u32; 2] = [0xffff_fff0, 0xffff_fff1];

/// The functions of a `.gopclntab` whose text starts at `text` (the `.text` section's
/// address: the header's own `textStart` is zero in the file). Empty where the table is
/// not one this reads; never reads past the section.
pub(super) fn functions(table: &[u8], text: u64) -> Vec<Symbol> {
    read(table, text, &mut 0).unwrap_or_default()
}

/// [`functions`], counting in `work` the name bytes it looked at.
///
/// The time is linear in the table's size: each name is read at its own offset, its NUL
/// looked for in at most [`MAX_NAME`] + 1 bytes (a longer name is cut, as every name that
/// crosses back to the parent is), and the bytes looked at add up to at most the table's
/// size. Go's linker writes each function's name once, NUL-terminated, apart from every
/// other (`cmd/link`'s `generateFuncnametab`), so a real table's names fit in it; a table
/// whose names overlap past that (every function named by the same 32 MiB run of bytes,
/// which took minutes to read name by name) is no table.
fn read(t: &[u8], text: u64, work: &mut usize) -> Option<Vec<Symbol>> {
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
        let name_off = t.get(record.checked_add(4)?..record.checked_add(8)?)?;
        let name_off = i32::from_le_bytes(name_off.try_into().ok()?);
        let start = names.checked_add(usize::try_from(name_off).ok()?)?;
        let rest = t.get(start..)?;
        let window = &rest[..rest.len().min(MAX_NAME + 1)];
        let nul = window.iter().position(|&b| b == 0);
        *work += nul.map_or(window.len(), |len| len + 1);
        if *work > t.len() {
            return None;
        }
        let name = match nul {
            Some(len) => match std::str::from_utf8(&window[..len]) {
                Ok(name) => name.to_string(),
                Err(_) => continue,
            },
            // Longer than a name may be: cut on a character boundary, and marked as cut.
            None if window.len() > MAX_NAME => match std::str::from_utf8(&window[..MAX_NAME]) {
                Ok(name) => format!("{name}…"),
                Err(e) if e.error_len().is_none() => {
                    let whole = &window[..e.valid_up_to()];
                    format!("{}…", std::str::from_utf8(whole).ok()?)
                }
                Err(_) => continue,
            },
            // The table ends inside the name.
            None => return None,
        };
        if end > entry {
            out.push(Symbol {
                start: text + u64::from(entry),
                end: text + u64::from(end),
                name,
            });
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table laid out as Go 1.20's linker lays it out: its header, the `names`, then the
    /// function table (each function's entry and the end's), then one `_func` record per
    /// function (its entry and its name's offset in `names`).
    fn laid_out(names: &[u8], functions: &[(u32, i32)], end: u32) -> Vec<u8> {
        let mut t = vec![0u8; 72];
        t[..4].copy_from_slice(&0xffff_fff1u32.to_le_bytes());
        t[6] = 1;
        t[7] = 8;
        let names_at = 72u64;
        let functab_at = names_at + names.len() as u64;
        let n = functions.len() as u64;
        for (i, v) in [n, 0, 0, names_at, 0, 0, 0, functab_at].iter().enumerate() {
            t[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        t.extend_from_slice(names);
        let funcs_at = (n as u32 + 1) * 8;
        for (i, &(entry, _)) in functions.iter().enumerate() {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&(funcs_at + 8 * i as u32).to_le_bytes());
        }
        t.extend_from_slice(&end.to_le_bytes());
        t.extend_from_slice(&0u32.to_le_bytes());
        for &(entry, name) in functions {
            t.extend_from_slice(&entry.to_le_bytes());
            t.extend_from_slice(&name.to_le_bytes());
        }
        t
    }

    /// A table of two functions.
    fn table() -> Vec<u8> {
        laid_out(b"main.main\0runtime.gopark\0", &[(0, 0), (0x40, 10)], 0x90)
    }

    /// The shape that kept a parser busy for minutes: `n` functions, each named by the
    /// same run of `run` bytes (not UTF-8 at its end, so that no name is kept), whose NUL
    /// comes last. Read name by name to its NUL, that is `n` × `run` bytes.
    fn crafted(run: usize, n: usize) -> Vec<u8> {
        let mut names = vec![b'a'; run];
        names[run - 2] = 0xff;
        names[run - 1] = 0;
        let functions: Vec<(u32, i32)> = (0..n).map(|i| (i as u32 * 16, 0)).collect();
        laid_out(&names, &functions, n as u32 * 16)
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
    fn names_overlapping_past_the_table_are_no_table_and_cost_at_most_its_size() {
        let t = crafted(4 << 20, 1 << 16);
        let mut work = 0;
        assert_eq!(read(&t, 0x401000, &mut work), None);
        assert!(
            work <= t.len() + MAX_NAME + 1,
            "{work} bytes looked at in a table of {}",
            t.len()
        );
        // A real table's names are each looked at once, to their NUL.
        let mut work = 0;
        assert_eq!(
            read(&table(), 0x401000, &mut work).map(|f| f.len()),
            Some(2)
        );
        assert_eq!(work, b"main.main\0runtime.gopark\0".len());
    }

    #[test]
    fn a_name_longer_than_the_wire_allows_is_cut_there() {
        let mut names = "é".repeat(MAX_NAME).into_bytes();
        names.push(0);
        names.extend_from_slice(b"main.main\0");
        let next = names.len() as i32 - 10;
        let f = functions(&laid_out(&names, &[(0, 0), (0x10, next)], 0x20), 0);
        assert_eq!(f.len(), 2);
        // Cut on a character boundary: 512 two-byte characters fill the 1 KiB.
        assert_eq!(f[0].name, format!("{}…", "é".repeat(MAX_NAME / 2)));
        assert_eq!(f[1].name, "main.main");
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
