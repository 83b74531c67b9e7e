//! Kernel symbols from `/proc/kallsyms` (addresses are visible to root, or with
//! `kptr_restrict` 0; otherwise every address reads 0 and nothing resolves).

/// Larger than any kernel function (the largest are a few tens of KiB).
const MAX_FUNCTION_SIZE: u64 = 256 * 1024;

#[derive(Debug, Default, Clone)]
pub struct Kallsyms {
    /// (address, name), sorted by address; text symbols only.
    symbols: Vec<(u64, String)>,
    /// Data symbols (variables: d, D, b, B, r, R), sorted by address.
    data: Vec<(u64, String)>,
}

impl Kallsyms {
    pub fn load() -> Kallsyms {
        std::fs::read_to_string("/proc/kallsyms")
            .map(|t| Kallsyms::parse(&t))
            .unwrap_or_default()
    }

    pub fn parse(text: &str) -> Kallsyms {
        let mut symbols = Vec::new();
        let mut data = Vec::new();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            match kind {
                "t" | "T" | "w" | "W" => symbols.push((addr, name.to_string())),
                "d" | "D" | "b" | "B" => data.push((addr, name.to_string())),
                _ => {}
            }
        }
        symbols.sort_by_key(|s| s.0);
        data.sort_by_key(|s| s.0);
        Kallsyms { symbols, data }
    }

    /// The kernel variable at or just below `addr` (within `max_offset` bytes), with the
    /// offset into it: a lock that is a global or a member of one.
    pub fn lookup_data(&self, addr: u64, max_offset: u64) -> Option<(&str, u64)> {
        let i = self.data.partition_point(|s| s.0 <= addr);
        let (start, name) = self.data.get(i.checked_sub(1)?)?;
        (addr - start <= max_offset).then_some((name.as_str(), addr - start))
    }

    /// Kernel variables from the one at or before `start` up to `end` (exclusive), with the
    /// distance to the next symbol as an upper bound of their size (kallsyms has no sizes).
    pub fn data_around(&self, start: u64, end: u64) -> Vec<(u64, &str, u64)> {
        let first = self
            .data
            .partition_point(|s| s.0 <= start)
            .saturating_sub(1);
        let mut out = Vec::new();
        for (i, (addr, name)) in self.data.iter().enumerate().skip(first) {
            if *addr >= end {
                break;
            }
            let next = self.data.get(i + 1).map_or(*addr, |n| n.0);
            out.push((*addr, name.as_str(), next.saturating_sub(*addr)));
        }
        out
    }

    /// How many kernel variables kallsyms lists (a few dozen without CONFIG_KALLSYMS_ALL).
    pub fn data_symbols(&self) -> usize {
        self.data.len()
    }

    /// Whether addresses are visible (false under kptr_restrict without privileges).
    pub fn is_usable(&self) -> bool {
        !self.symbols.is_empty()
    }

    /// The function containing `addr`: the nearest symbol at or below it.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|s| s.0 <= addr);
        // No kernel function is this large: the address is in code loaded after the
        // symbols were read (BPF programs, a new module), not in the symbol below it.
        if i == 0 || addr - self.symbols[i - 1].0 > MAX_FUNCTION_SIZE {
            return None;
        }
        Some(&self.symbols[i - 1].1)
    }

    /// The address of a symbol, by name.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.symbols.iter().find(|s| s.1 == name).map(|s| s.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_the_enclosing_function() {
        let k = Kallsyms::parse(
            "ffffffff81000100 T do_syscall_64\nffffffff81000000 T _stext\nffffffff81000200 d some_data\nffffffff81000300 t exc_page_fault\n",
        );
        assert_eq!(k.lookup(0xffffffff81000150), Some("do_syscall_64"));
        assert_eq!(
            k.lookup(0xffffffff81000250),
            Some("do_syscall_64"),
            "data symbols are skipped"
        );
        assert_eq!(k.lookup(0xffffffff81000300), Some("exc_page_fault"));
        assert_eq!(k.lookup(0x1000), None);
        assert_eq!(k.address_of("_stext"), Some(0xffffffff81000000));
        assert_eq!(
            k.lookup_data(0xffffffff81000208, 64),
            Some(("some_data", 8))
        );
        assert_eq!(k.lookup_data(0xffffffff81000208, 4), None);
    }

    #[test]
    fn the_running_kernel_has_symbols_when_root() {
        let k = Kallsyms::load();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc_geteuid() } != 0 {
            assert!(std::env::var_os("CI").is_none(), "CI runs as root");
            eprintln!("skipped: kernel addresses are hidden from non-root users");
            return;
        }
        {
            assert!(k.is_usable());
            let addr = k
                .address_of("do_syscall_64")
                .expect("do_syscall_64 in kallsyms");
            assert_eq!(k.lookup(addr + 4), Some("do_syscall_64"));
        }
    }

    extern "C" {
        #[link_name = "geteuid"]
        fn libc_geteuid() -> u32;
    }
}
