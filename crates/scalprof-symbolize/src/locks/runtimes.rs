//! Which language runtime each traced process ran, from the files it mapped: what the
//! lock rows of that process mean (goroutines, monitors, the GIL) depends on it.

use std::collections::BTreeSet;
use std::path::Path;

use scalprof_model::locks::{RawLocks, Runtime, RuntimeSeen};

use crate::profile::Symbols;

/// The runtime a mapped file says a process runs, by the file's name first (a shared
/// runtime library), then by its symbols (a runtime linked into the executable).
fn runtime_of(path: &str, symbols: &mut Symbols) -> Option<Runtime> {
    let file = path.rsplit('/').next().unwrap_or(path);
    if file == "libjvm.so" {
        return Some(Runtime::HotSpot);
    }
    if file.starts_with("libpython3") {
        return Some(Runtime::CPython);
    }
    if file.starts_with("libnode.so") || file == "node" || file == "nodejs" {
        return Some(Runtime::Node);
    }
    if !path.starts_with('/') || file.starts_with("lib") {
        return None;
    }
    let elf = symbols.files.get(Path::new(path))?;
    if elf.object_address("_PyRuntime").is_some() {
        Some(Runtime::CPython)
    } else if elf.symbol_address("runtime.main").is_some() {
        Some(Runtime::Go)
    } else {
        None
    }
}

/// The runtimes of the traced processes, each with the process's command name, sorted.
pub(super) fn runtimes_seen(raw: &RawLocks, symbols: &mut Symbols) -> Vec<RuntimeSeen> {
    let mut seen = BTreeSet::new();
    for (tgid, maps) in &raw.maps {
        let mut paths: Vec<&str> = maps
            .iter()
            .filter(|m| m.executable)
            .map(|m| m.path.as_str())
            .collect();
        paths.dedup();
        let process = raw
            .waker_comms
            .get(tgid)
            .cloned()
            .unwrap_or_else(|| tgid.to_string());
        for p in paths {
            if let Some(runtime) = runtime_of(p, symbols) {
                // A Go program is its executable; its thread's name may still be the
                // shell's that executed it when the tracer read it.
                let process = match runtime {
                    Runtime::Go => p.rsplit('/').next().unwrap_or(p).to_string(),
                    _ => process.clone(),
                };
                seen.insert(RuntimeSeen { runtime, process });
                break;
            }
        }
    }
    seen.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_library_names_the_runtime_without_reading_it() {
        let mut symbols = Symbols {
            kernel: Default::default(),
            files: Default::default(),
        };
        assert_eq!(
            runtime_of("/usr/lib/jvm/java-17/lib/server/libjvm.so", &mut symbols),
            Some(Runtime::HotSpot)
        );
        assert_eq!(
            runtime_of("/usr/lib/libpython3.11.so.1.0", &mut symbols),
            Some(Runtime::CPython)
        );
        assert_eq!(
            runtime_of("/usr/lib/x86_64-linux-gnu/libc.so.6", &mut symbols),
            None
        );
        assert_eq!(runtime_of("[vdso]", &mut symbols), None);
    }
}
