//! Where a user lock word is, and the name a row takes from it. The run document writes a
//! row's name as one string (`table_lock`, `STDOUT+0x8`, `libfoo.so+0x1234`, `heap 0x55…`,
//! `mutex@cache::get (heap)`); these types write it, and [`CallerNamed::parse`] is the one
//! place that reads a stored name back into its parts.

use std::fmt;

use super::LockKind;

/// Memory with no symbol a lock word can be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    /// Allocated (`[heap]`).
    Heap,
    /// A thread's stack (`[stack]`).
    Stack,
    /// An anonymous mapping.
    Anon,
}

impl Region {
    fn word(self) -> &'static str {
        match self {
            Region::Heap => "heap",
            Region::Stack => "stack",
            Region::Anon => "anon",
        }
    }
}

/// Where a user lock word is, from the process's mappings and the files' symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockPlace {
    /// In a file's data, at a symbol (`table_lock`, `std::io::stdio::STDOUT+0x8`).
    Symbol { name: String, offset: u64 },
    /// In a mapped file with no symbol there (`libfoo.so+0x1234`).
    File { file: String, offset: u64 },
    /// In memory with no symbol (`heap 0x…`), or in no mapping at all (`0x…`).
    Dynamic { region: Option<Region>, addr: u64 },
}

impl fmt::Display for LockPlace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockPlace::Symbol { name, offset: 0 } => f.write_str(name),
            LockPlace::Symbol { name, offset } => write!(f, "{name}+{offset:#x}"),
            LockPlace::File { file, offset } => write!(f, "{file}+{offset:#x}"),
            LockPlace::Dynamic {
                region: Some(r),
                addr,
            } => write!(f, "{} {addr:#x}", r.word()),
            LockPlace::Dynamic { region: None, addr } => write!(f, "{addr:#x}"),
        }
    }
}

impl LockPlace {
    /// Whether no symbol names it: its address changes from run to run (ASLR, the
    /// allocator), so a row is named by the function that takes it instead.
    pub fn is_dynamic(&self) -> bool {
        matches!(self, LockPlace::Dynamic { .. })
    }

    /// The data symbol it is at or inside.
    pub fn symbol(&self) -> Option<&str> {
        match self {
            LockPlace::Symbol { name, .. } => Some(name),
            _ => None,
        }
    }

    /// The symbol of a row's name that a [`LockPlace::Symbol`] wrote (`STDOUT+0x8` →
    /// `STDOUT`), for rows read back from a stored run document; other names as they are.
    pub fn symbol_in(name: &str) -> &str {
        match name.rsplit_once("+0x") {
            Some((symbol, offset))
                if !offset.is_empty() && offset.bytes().all(|b| b.is_ascii_hexdigit()) =>
            {
                symbol
            }
            _ => name,
        }
    }

    /// What a name made from its taker says of a dynamic place: its region, or for an
    /// address in no mapping, the address.
    pub fn region(&self) -> Option<String> {
        match self {
            LockPlace::Dynamic {
                region: Some(r), ..
            } => Some(r.word().to_string()),
            LockPlace::Dynamic { region: None, addr } => Some(format!("{addr:#x}")),
            _ => None,
        }
    }
}

/// A kernel lock with neither a symbol nor a conventional name, named by its kind and the
/// first function outside the lock's own code that took it (`rwsem:W@do_mprotect_pkey`):
/// the one writer of that name, so that a row is found again by building it.
pub fn kernel_lock_taken_by(kind: &LockKind, caller: &str) -> String {
    format!("{kind}@{caller}")
}

/// A lock in memory with no symbol, named by the function that takes it so that repeats
/// and points agree: `mutex@cache::get (heap)`, or `mutex (heap)` with no caller seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallerNamed {
    pub kind: LockKind,
    pub caller: Option<String>,
    /// [`LockPlace::region`]: `heap`, `stack`, `anon` or an address.
    pub region: String,
}

impl fmt::Display for CallerNamed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.caller {
            Some(c) => write!(f, "{}@{c} ({})", self.kind, self.region),
            None => write!(f, "{} ({})", self.kind, self.region),
        }
    }
}

impl CallerNamed {
    /// The parts of a row's name written by [`CallerNamed`]'s Display, for rows read back
    /// from a stored run document (the one reader of that format).
    pub fn parse(name: &str) -> Option<CallerNamed> {
        let (head, region) = name.strip_suffix(')')?.rsplit_once(" (")?;
        let (kind, caller) = match head.split_once('@') {
            Some((kind, caller)) => (kind, Some(caller.to_string())),
            None => (head, None),
        };
        let named = CallerNamed {
            kind: LockKind::from(kind),
            caller,
            region: region.to_string(),
        };
        // Only what Display would have written: `(heap)` after a kind, not a C++
        // signature's parentheses.
        (named.to_string() == name && !kind.is_empty() && !kind.contains(' ')).then_some(named)
    }

    /// Whether it is allocated memory (`(heap)`).
    pub fn in_heap(&self) -> bool {
        self.region == Region::Heap.word()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_write_the_names_rows_have_always_had() {
        let sym = |name: &str, offset| LockPlace::Symbol {
            name: name.into(),
            offset,
        };
        assert_eq!(sym("table_lock", 0).to_string(), "table_lock");
        assert_eq!(sym("STDOUT", 8).to_string(), "STDOUT+0x8");
        let file = LockPlace::File {
            file: "libfoo.so".into(),
            offset: 0x40,
        };
        assert_eq!(file.to_string(), "libfoo.so+0x40");
        let heap = LockPlace::Dynamic {
            region: Some(Region::Heap),
            addr: 0x55e0,
        };
        assert_eq!(heap.to_string(), "heap 0x55e0");
        assert!(heap.is_dynamic() && !file.is_dynamic());
        let nowhere = LockPlace::Dynamic {
            region: None,
            addr: 0x7f00,
        };
        assert_eq!(nowhere.to_string(), "0x7f00");
        assert_eq!(nowhere.region().as_deref(), Some("0x7f00"));
        assert_eq!(
            LockPlace::symbol_in(&sym("STDOUT", 8).to_string()),
            "STDOUT"
        );
        assert_eq!(LockPlace::symbol_in("table_lock"), "table_lock");
        assert_eq!(LockPlace::symbol_in("a+0xzz"), "a+0xzz");
    }

    #[test]
    fn a_caller_named_lock_reads_back_as_it_was_written() {
        for named in [
            CallerNamed {
                kind: LockKind::Mutex,
                caller: Some("arc::lookup".into()),
                region: "heap".into(),
            },
            CallerNamed {
                kind: LockKind::Futex,
                caller: None,
                region: "0x7f00".into(),
            },
            CallerNamed {
                kind: LockKind::Condvar,
                caller: Some("[liblzma.so.5]+0xc5ad".into()),
                region: "anon".into(),
            },
        ] {
            assert_eq!(CallerNamed::parse(&named.to_string()), Some(named));
        }
        assert!(CallerNamed::parse("mutex@arc::lookup (heap)").is_some_and(|n| n.in_heap()));
        for other in [
            "table_lock",
            "heap 0x55e0",
            "Cache::get(unsigned long)",
            "chan a → b",
            "GIL",
        ] {
            assert_eq!(CallerNamed::parse(other), None, "{other}");
        }
    }
}
