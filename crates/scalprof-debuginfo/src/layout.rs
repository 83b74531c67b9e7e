//! Data layout of a binary: its global variables with their DWARF types and struct members,
//! and which of them are targets of locked (atomic) instructions — the `nm | sort` view of
//! the NetBSD thread, with pahole's member offsets, automated.
//!
//! The DWARF walk is written by hand on gimli: it needs only global variables with a fixed
//! address (DW_OP_addr) and the size, name and members of their types.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use addr2line::gimli;
use gimli::{AttributeValue, EndianSlice, RunTimeEndian, UnitOffset};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

use crate::DebugInfoError;

pub use scalprof_model::layout::{DataObject, Layout, Member};

pub use scalprof_model::layout::is_lock_type_name as is_lock_type;

/// Reads the data layout of an ELF file: in a parser child without privileges when
/// separation is on ([`crate::sandbox`]), here otherwise.
pub fn read_layout(path: &Path) -> Result<Layout, DebugInfoError> {
    let file = crate::open_regular(path).map_err(|source| DebugInfoError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let parse_error = |reason: String| DebugInfoError::Parse {
        path: path.to_path_buf(),
        reason,
    };
    match crate::sandbox::parser() {
        Some(exe) => parse_layout(exe, &file).map_err(parse_error),
        None => crate::elf::read_all(file)
            .and_then(|data| layout_of(&data, Path::new(crate::elf::DEBUG_ROOT)))
            .map_err(parse_error),
    }
}

/// [`read_layout`], looking for separate debug files under `debug_root` (as symbolization
/// does, by build id): a stripped binary whose debug package is installed keeps its
/// symbols, types and fields.
/// A file's data layout, read by a child.
pub(crate) fn parse_layout(exe: &Path, file: &std::fs::File) -> Result<Layout, String> {
    let mut parser =
        crate::sandbox::Parser::spawn_brokered(exe, "layout", file).map_err(|e| e.to_string())?;
    parser.close_input();
    let mut w = parser.reply()?;
    w.get_status()?;
    serde_json::from_slice(w.get_bytes()?).map_err(|e| format!("the parser's layout: {e}"))
}

#[cfg(test)]
fn read_layout_with_debug_root(path: &Path, debug_root: &Path) -> Result<Layout, DebugInfoError> {
    let data = crate::open_regular(path)
        .map_err(|e| e.to_string())
        .and_then(crate::elf::read_all);
    data.and_then(|d| layout_of(&d, debug_root))
        .map_err(|reason| DebugInfoError::Parse {
            path: path.to_path_buf(),
            reason,
        })
}

/// The layout of the ELF file `data`, its separate debug file (by build id) looked up
/// under `debug_root`. Compressed debug sections are checked before any inflates.
pub(crate) fn layout_of(data: &[u8], debug_root: &Path) -> Result<Layout, String> {
    let obj = object::File::parse(data).map_err(|e| e.to_string())?;
    crate::elf::check_compressed_sections(data)?;
    // Symbols: data objects with a size.
    let mut objects: Vec<DataObject> = obj
        .symbols()
        .chain(obj.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Data && s.address() != 0 && s.size() > 0)
        .filter_map(|s| {
            Some(DataObject {
                name: crate::elf::demangle(s.name().ok()?.split('@').next()?).into_owned(),
                address: s.address(),
                size: s.size(),
                type_name: None,
                members: Vec::new(),
                atomic_target: false,
                lock_type: false,
            })
        })
        .collect();
    objects.sort_by(|a, b| a.address.cmp(&b.address).then_with(|| a.name.cmp(&b.name)));
    objects.dedup_by(|b, a| a.address == b.address);
    // The separate debug file, by build id, when the binary carries no DWARF of its own.
    let debug_data = if obj.section_by_name(".debug_info").is_none() {
        obj.build_id()
            .ok()
            .flatten()
            .and_then(|id| crate::elf::debug_file_under(debug_root, id))
            .and_then(|p| crate::open_regular(&p).ok())
            .and_then(|f| crate::elf::read_all(f).ok())
            .filter(|d| crate::elf::check_compressed_sections(d).is_ok())
    } else {
        None
    };
    let debug_obj = debug_data
        .as_deref()
        .and_then(|d| object::File::parse(d).ok());
    if let Some(dbg) = &debug_obj {
        // A stripped binary's symbol table lives in its debug file.
        for s in dbg
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Data && s.address() != 0 && s.size() > 0)
        {
            let Some(name) = s.name().ok().and_then(|n| n.split('@').next()) else {
                continue;
            };
            if !objects.iter().any(|o| o.address == s.address()) {
                objects.push(DataObject {
                    name: crate::elf::demangle(name).into_owned(),
                    address: s.address(),
                    size: s.size(),
                    type_name: None,
                    members: Vec::new(),
                    atomic_target: false,
                    lock_type: false,
                });
            }
        }
        objects.sort_by(|a, b| a.address.cmp(&b.address).then_with(|| a.name.cmp(&b.name)));
    }
    let has_symbols = !objects.is_empty();

    let types = dwarf_variables(debug_obj.as_ref().unwrap_or(&obj));
    let has_dwarf = !types.is_empty();
    for o in &mut objects {
        if let Some((type_name, members)) = types.get(&o.address) {
            o.lock_type =
                is_lock_type(type_name) || members.iter().any(|m| is_lock_type(&m.type_name));
            o.type_name = Some(type_name.clone());
            o.members = members.clone();
        }
    }
    let targets = atomic_targets(&obj);
    for o in &mut objects {
        o.atomic_target = targets
            .iter()
            .any(|&a| a >= o.address && a < o.address + o.size);
    }
    let host = if cfg!(target_arch = "x86_64") {
        Some(object::Architecture::X86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(object::Architecture::Aarch64)
    } else {
        None
    };
    let foreign_architecture =
        (host != Some(obj.architecture())).then(|| format!("{:?}", obj.architecture()));
    Ok(Layout {
        foreign_architecture,
        objects,
        has_dwarf,
        has_symbols,
    })
}

type Reader<'a> = EndianSlice<'a, RunTimeEndian>;

/// address → (type name, members) for every global variable with DW_OP_addr.
fn dwarf_variables(obj: &object::File<'_>) -> HashMap<u64, (String, Vec<Member>)> {
    let endian = if obj.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Reader<'_>, gimli::Error> {
        let data = obj
            .section_by_name(id.name())
            .and_then(|s| s.data().ok())
            .unwrap_or(&[]);
        Ok(EndianSlice::new(data, endian))
    };
    let mut out = HashMap::new();
    let Ok(dwarf) = gimli::Dwarf::load(load) else {
        return out;
    };
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else {
            continue;
        };
        let mut entries = unit.entries();
        while let Ok(Some(e)) = entries.next_dfs() {
            if e.tag() != gimli::DW_TAG_variable {
                continue;
            }
            let Some(addr) = variable_address(&unit, e) else {
                continue;
            };
            let Some(AttributeValue::UnitRef(ty)) = e.attr_value(gimli::DW_AT_type) else {
                continue;
            };
            let name = type_name(&dwarf, &unit, ty, 0);
            let members = struct_members(&dwarf, &unit, ty);
            out.insert(addr, (name, members));
        }
    }
    out
}

fn variable_address(
    unit: &gimli::Unit<Reader<'_>>,
    e: &gimli::DebuggingInformationEntry<Reader<'_>>,
) -> Option<u64> {
    let AttributeValue::Exprloc(expr) = e.attr_value(gimli::DW_AT_location)? else {
        return None;
    };
    let mut ops = expr.operations(unit.encoding());
    match ops.next().ok()?? {
        gimli::Operation::Address { address } => Some(address),
        _ => None,
    }
}

fn entry_name(
    dwarf: &gimli::Dwarf<Reader<'_>>,
    unit: &gimli::Unit<Reader<'_>>,
    e: &gimli::DebuggingInformationEntry<Reader<'_>>,
) -> Option<String> {
    let v = e.attr_value(gimli::DW_AT_name)?;
    dwarf
        .attr_string(unit, v)
        .ok()
        .map(|s| s.to_string_lossy().into_owned())
}

/// A readable name for a type: typedef names win (pthread_mutex_t), then struct/union
/// names, base types, pointers and arrays.
fn type_name(
    dwarf: &gimli::Dwarf<Reader<'_>>,
    unit: &gimli::Unit<Reader<'_>>,
    off: UnitOffset,
    depth: u32,
) -> String {
    if depth > 8 {
        return "?".into();
    }
    let Ok(e) = unit.entry(off) else {
        return "?".into();
    };
    let inner = || match e.attr_value(gimli::DW_AT_type) {
        Some(AttributeValue::UnitRef(t)) => type_name(dwarf, unit, t, depth + 1),
        _ => "void".into(),
    };
    let name = entry_name(dwarf, unit, &e);
    match e.tag() {
        gimli::DW_TAG_typedef | gimli::DW_TAG_base_type => name.unwrap_or_else(inner),
        gimli::DW_TAG_structure_type => {
            format!("struct {}", name.unwrap_or_else(|| "(anonymous)".into()))
        }
        gimli::DW_TAG_union_type => {
            format!("union {}", name.unwrap_or_else(|| "(anonymous)".into()))
        }
        gimli::DW_TAG_pointer_type => format!("{} *", inner()),
        gimli::DW_TAG_const_type => format!("const {}", inner()),
        gimli::DW_TAG_volatile_type => format!("volatile {}", inner()),
        gimli::DW_TAG_atomic_type => format!("_Atomic {}", inner()),
        gimli::DW_TAG_array_type => format!("{}[]", inner()),
        _ => name.unwrap_or_else(|| "?".into()),
    }
}

fn type_size(unit: &gimli::Unit<Reader<'_>>, off: UnitOffset, depth: u32) -> u64 {
    if depth > 8 {
        return 0;
    }
    let Ok(e) = unit.entry(off) else { return 0 };
    if let Some(v) = e.attr_value(gimli::DW_AT_byte_size) {
        if let Some(n) = v.udata_value() {
            return n;
        }
    }
    match e.attr_value(gimli::DW_AT_type) {
        Some(AttributeValue::UnitRef(t)) if e.tag() != gimli::DW_TAG_pointer_type => {
            let elem = type_size(unit, t, depth + 1);
            if e.tag() == gimli::DW_TAG_array_type {
                elem * array_count(unit, off).unwrap_or(1)
            } else {
                elem
            }
        }
        _ if e.tag() == gimli::DW_TAG_pointer_type => 8,
        _ => 0,
    }
}

fn array_count(unit: &gimli::Unit<Reader<'_>>, off: UnitOffset) -> Option<u64> {
    let mut tree = unit.entries_tree(Some(off)).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    let mut n = 1;
    while let Ok(Some(child)) = children.next() {
        let e = child.entry();
        if e.tag() == gimli::DW_TAG_subrange_type {
            if let Some(v) = e.attr_value(gimli::DW_AT_count) {
                n *= v.udata_value()?;
            } else if let Some(v) = e.attr_value(gimli::DW_AT_upper_bound) {
                n *= v.udata_value()? + 1;
            }
        }
    }
    Some(n)
}

/// The members of a struct or union (through typedefs and qualifiers), with offsets.
fn struct_members(
    dwarf: &gimli::Dwarf<Reader<'_>>,
    unit: &gimli::Unit<Reader<'_>>,
    off: UnitOffset,
) -> Vec<Member> {
    let mut off = off;
    for _ in 0..8 {
        let Ok(e) = unit.entry(off) else {
            return Vec::new();
        };
        match e.tag() {
            gimli::DW_TAG_typedef | gimli::DW_TAG_const_type | gimli::DW_TAG_volatile_type => {
                match e.attr_value(gimli::DW_AT_type) {
                    Some(AttributeValue::UnitRef(t)) => off = t,
                    _ => return Vec::new(),
                }
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type => break,
            _ => return Vec::new(),
        }
    }
    let Ok(mut tree) = unit.entries_tree(Some(off)) else {
        return Vec::new();
    };
    let Ok(root) = tree.root() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut children = root.children();
    while let Ok(Some(child)) = children.next() {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_member {
            continue;
        }
        let offset = match e.attr_value(gimli::DW_AT_data_member_location) {
            Some(v) => v.udata_value().unwrap_or(0),
            _ => 0,
        };
        let (type_name, size) = match e.attr_value(gimli::DW_AT_type) {
            Some(AttributeValue::UnitRef(t)) => {
                (type_name(dwarf, unit, t, 0), type_size(unit, t, 0))
            }
            _ => ("?".into(), 0),
        };
        out.push(Member {
            name: entry_name(dwarf, unit, e).unwrap_or_else(|| "(anonymous)".into()),
            offset,
            size,
            type_name,
        });
    }
    out
}

/// Stated addresses written by locked instructions with a RIP-relative operand
/// (`lock add [rip+x]`, `xchg [rip+x]`: x86-64 only). Accesses through a register are not
/// resolved here.
fn atomic_targets(obj: &object::File<'_>) -> HashSet<u64> {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind, Register};
    let mut out = HashSet::new();
    if obj.architecture() != object::Architecture::X86_64 {
        return out;
    }
    for sec in obj.sections() {
        if sec.kind() != object::SectionKind::Text {
            continue;
        }
        let Ok(code) = sec.data() else { continue };
        let mut dec = Decoder::with_ip(64, code, sec.address(), DecoderOptions::NONE);
        while dec.can_decode() {
            let ins = dec.decode();
            let locked = ins.has_lock_prefix()
                || (ins.mnemonic() == Mnemonic::Xchg
                    && (0..ins.op_count()).any(|i| ins.op_kind(i) == OpKind::Memory));
            if locked && ins.memory_base() == Register::RIP {
                out.insert(ins.ip_rel_memory_address());
            }
        }
    }
    out
}

/// A locked (atomic) write found at or just before a sampled instruction, and what it
/// writes: a base address (a global) plus a displacement, possibly indexed by a register
/// whose value is not known statically (a per-thread field, an array element).
#[derive(Clone, Debug, PartialEq)]
pub struct AtomicAccess {
    /// The locked instruction's stated address.
    pub ip: u64,
    /// Stated address of the global the operand is based on, displacement included.
    pub address: u64,
    /// The operand adds an index register: each thread may write a different offset.
    pub indexed: bool,
}

/// Decodes the function around `svma` and, if the sampled instruction or one of the two
/// before it (timer-interrupt skid) is a locked write to memory, resolves its operand:
/// RIP-relative directly, or a base register traced back within the function to a
/// `lea reg, [rip+X]` (through register moves and index arithmetic). GOT loads and
/// function arguments are not resolved.
pub fn atomic_access_near(elf: &crate::ElfInfo, svma: u64) -> Option<AtomicAccess> {
    use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};
    let (start, end) = elf.symbol_range(svma)?;
    let (text_range, text) = elf.unwind_sections().text.clone()?;
    if start < text_range.start || end > text_range.end || end <= start {
        return None;
    }
    let code = &text[(start - text_range.start) as usize..(end - text_range.start) as usize];
    let mut dec = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    let mut ins: Vec<Instruction> = Vec::new();
    while dec.can_decode() {
        let i = dec.decode();
        let past = i.ip() > svma;
        ins.push(i);
        if past {
            break;
        }
    }
    let at = ins.iter().rposition(|i| i.ip() <= svma)?;
    let is_locked_write = |i: &Instruction| {
        let mem = (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory);
        mem && (i.has_lock_prefix() || i.mnemonic() == Mnemonic::Xchg)
    };
    let idx = (at.saturating_sub(2)..=at)
        .rev()
        .find(|&k| is_locked_write(&ins[k]))?;
    let locked = &ins[idx];
    if locked.memory_base() == Register::RIP {
        return Some(AtomicAccess {
            ip: locked.ip(),
            address: locked.ip_rel_memory_address(),
            indexed: false,
        });
    }
    let mut indexed = locked.memory_index() != Register::None;
    let mut reg = locked.memory_base().full_register();
    let mut displacement = locked.memory_displacement64();
    let mut k = idx;
    for _ in 0..200 {
        k = k.checked_sub(1)?;
        let i = &ins[k];
        if i.op_count() == 0
            || i.op0_kind() != OpKind::Register
            || i.op0_register().full_register() != reg
        {
            continue;
        }
        match i.mnemonic() {
            Mnemonic::Lea if i.memory_base() == Register::RIP => {
                return Some(AtomicAccess {
                    ip: locked.ip(),
                    address: i.ip_rel_memory_address().wrapping_add(displacement),
                    indexed,
                });
            }
            Mnemonic::Lea => {
                indexed |= i.memory_index() != Register::None;
                displacement = displacement.wrapping_add(i.memory_displacement64());
                reg = i.memory_base().full_register();
                if reg == Register::None {
                    return None;
                }
            }
            Mnemonic::Mov if i.op1_kind() == OpKind::Register => {
                reg = i.op1_register().full_register()
            }
            // A load (the GOT, a pointer in memory): not resolved statically.
            Mnemonic::Mov => return None,
            // Index arithmetic on the register: keep looking for where its base came from.
            _ => indexed = true,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn run(cmd: &mut Command) {
        let st = cmd.status().unwrap();
        assert!(st.success(), "{cmd:?}");
    }

    #[test]
    fn a_stripped_binary_is_laid_out_from_its_separate_debug_file() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("t.c");
        std::fs::write(
            &src,
            "struct stats { long hits; long misses; } stats;\n\
             int main(void) { __atomic_add_fetch(&stats.hits, 1, __ATOMIC_RELAXED); return 0; }\n",
        )
        .unwrap();
        let bin = dir.path().join("t");
        run(Command::new("cc")
            .args(["-O1", "-g", "-Wl,--build-id", "-o"])
            .arg(&bin)
            .arg(&src));
        let with_dwarf = read_layout(&bin).unwrap();
        let stats = |l: &Layout| l.objects.iter().find(|o| o.name == "stats").cloned();
        assert_eq!(stats(&with_dwarf).unwrap().members.len(), 2);

        // As a distribution ships it: stripped, with the DWARF in .build-id/ab/cdef….debug.
        let id = {
            let data = std::fs::read(&bin).unwrap();
            let obj = object::File::parse(&*data).unwrap();
            obj.build_id().unwrap().unwrap().to_vec()
        };
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let root = dir.path().join("debug");
        let debug_dir = root.join(".build-id").join(&hex[..2]);
        std::fs::create_dir_all(&debug_dir).unwrap();
        run(Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&bin)
            .arg(debug_dir.join(format!("{}.debug", &hex[2..]))));
        run(Command::new("strip").arg("--strip-all").arg(&bin));

        let bare = read_layout_with_debug_root(&bin, &dir.path().join("nowhere")).unwrap();
        assert!(stats(&bare).is_none(), "stripped: no symbol for stats");
        let found = read_layout_with_debug_root(&bin, &root).unwrap();
        let s = stats(&found).expect("the debug file names the variable");
        let fields: Vec<&str> = s.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(fields, ["hits", "misses"]);
        assert!(found.has_dwarf);
        assert!(
            s.atomic_target,
            "the locked add in the stripped code still resolves"
        );
    }
}
