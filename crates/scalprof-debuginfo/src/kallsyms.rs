//! Kernel symbols from `/proc/kallsyms` (addresses are visible to root, or with
//! `kptr_restrict` 0; otherwise every address reads 0 and nothing resolves).

#[derive(Debug, Default, Clone)]
pub struct Kallsyms {
    /// (address, name), sorted by address; text symbols only.
    symbols: Vec<(u64, String)>,
}

impl Kallsyms {
    pub fn load() -> Kallsyms {
        std::fs::read_to_string("/proc/kallsyms")
            .map(|t| Kallsyms::parse(&t))
            .unwrap_or_default()
    }

    pub fn parse(text: &str) -> Kallsyms {
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut it = line.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let kind = it.next()?;
                let name = it.next()?;
                (addr != 0 && matches!(kind, "t" | "T" | "w" | "W"))
                    .then(|| (addr, name.to_string()))
            })
            .collect();
        symbols.sort_by_key(|s| s.0);
        Kallsyms { symbols }
    }

    /// Whether addresses are visible (false under kptr_restrict without privileges).
    pub fn is_usable(&self) -> bool {
        !self.symbols.is_empty()
    }

    /// The function containing `addr`: the nearest symbol at or below it.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|s| s.0 <= addr);
        if i == 0 || i == self.symbols.len() && addr - self.symbols[i - 1].0 > 1 << 20 {
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
    }

    #[test]
    fn the_running_kernel_has_symbols_when_root() {
        let k = Kallsyms::load();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc_geteuid() } == 0 {
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
