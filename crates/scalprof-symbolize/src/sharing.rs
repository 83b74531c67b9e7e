//! The globals that hot instructions write with locked (atomic) instructions.
//!
//! The user instructions where samples landed are decoded; a locked write among them is
//! resolved to the global it writes (`atomic_access_near`), and the global's layout is
//! read from DWARF. The result is stored with the run; `scalprof_analyze::sharing` turns
//! it into false- and true-sharing findings.

use std::collections::HashMap;
use std::path::Path;

use scalprof_debuginfo::layout::{atomic_access_near, read_layout};
use scalprof_debuginfo::SymbolCache;
use scalprof_model::layout::{FileObject, Layout, SharingInputs, SharingSite};
use scalprof_model::HotInstruction;

/// Hot instructions examined (the heaviest of the last point).
const SITES_EXAMINED: usize = 32;

/// Resolves the heaviest of `hot` (the last point's hot instructions).
pub fn resolve(hot: &[HotInstruction], files: &mut SymbolCache, line: u64) -> SharingInputs {
    let mut layouts: HashMap<String, Option<Layout>> = HashMap::new();
    let mut out = SharingInputs {
        line,
        ..Default::default()
    };
    for h in hot.iter().take(SITES_EXAMINED) {
        if out
            .sites
            .iter()
            .any(|s| s.file == h.file && s.sampled == h.address)
        {
            continue;
        }
        let Some(access) = files
            .get(Path::new(&h.file))
            .and_then(|elf| atomic_access_near(&elf, h.address))
        else {
            continue;
        };
        let layout = layouts
            .entry(h.file.clone())
            .or_insert_with(|| read_layout(Path::new(&h.file)).ok());
        let Some(obj) = layout.as_ref().and_then(|l| {
            l.objects
                .iter()
                .find(|o| access.address >= o.address && access.address < o.address + o.size.max(1))
        }) else {
            continue;
        };
        if !out
            .objects
            .iter()
            .any(|o| o.file == h.file && o.object.name == obj.name)
        {
            out.objects.push(FileObject {
                file: h.file.clone(),
                object: obj.clone(),
            });
        }
        out.sites.push(SharingSite {
            file: h.file.clone(),
            sampled: h.address,
            ip: access.ip,
            address: access.address,
            indexed: access.indexed,
            object: obj.name.clone(),
            functions: files
                .get(Path::new(&h.file))
                .map(|elf| elf.frames(h.address))
                .unwrap_or_default(),
        });
    }
    out
}
