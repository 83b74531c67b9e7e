//! The running kernel's struct layouts, from its BTF (/sys/kernel/btf/vmlinux), flattened:
//! members of anonymous structs and unions are listed at their absolute offsets (on 6.18
//! `struct mm_struct` is one anonymous struct), so that cache lines can be drawn.

use libbpf_rs::btf::types::{Composite, MemberAttr};
use libbpf_rs::btf::{Btf, BtfKind, BtfType};
use libbpf_rs::AsRawLibbpf;
use scalprof_model::layout::Member;

use crate::DebugInfoError;

/// A kernel struct: its size and its members, flattened, by offset.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelStruct {
    pub name: String,
    pub size: u64,
    pub members: Vec<Member>,
}

fn size_of(btf: &Btf<'_>, ty: &BtfType<'_>) -> u64 {
    // SAFETY: the btf pointer is valid for the lifetime of `btf`; libbpf only reads it.
    let n = unsafe {
        libbpf_sys::btf__resolve_size(btf.as_libbpf_object().as_ptr(), ty.type_id().into())
    };
    n.max(0) as u64
}

fn display_name(ty: &BtfType<'_>) -> String {
    let name = ty.name().map(|n| n.to_string_lossy().into_owned());
    match ty.kind() {
        BtfKind::Struct => format!("struct {}", name.unwrap_or_else(|| "(anonymous)".into())),
        BtfKind::Union => format!("union {}", name.unwrap_or_else(|| "(anonymous)".into())),
        BtfKind::Ptr => "pointer".into(),
        BtfKind::Array => "array".into(),
        BtfKind::Const | BtfKind::Volatile | BtfKind::Restrict | BtfKind::TypeTag => {
            match ty.next_type() {
                Some(t) => display_name(&t),
                None => "?".into(),
            }
        }
        _ => name.unwrap_or_else(|| format!("{:?}", ty.kind()).to_lowercase()),
    }
}

fn flatten(
    btf: &Btf<'_>,
    comp: &Composite<'_>,
    base: u64,
    prefix: &str,
    depth: u32,
    out: &mut Vec<Member>,
) {
    if depth > 8 {
        return;
    }
    for m in comp.iter() {
        let Some(ty) = btf.type_by_id::<BtfType<'_>>(m.ty) else {
            continue;
        };
        let bits = match m.attr {
            MemberAttr::Normal { offset } | MemberAttr::BitField { offset, .. } => {
                u64::from(offset)
            }
        };
        let offset = base + bits / 8;
        let name = m.name.map(|n| n.to_string_lossy().into_owned());
        let resolved = ty.skip_mods_and_typedefs();
        match (&name, Composite::try_from(resolved)) {
            // An anonymous struct/union: its members belong to the enclosing struct.
            (None, Ok(inner)) => flatten(btf, &inner, offset, prefix, depth + 1, out),
            _ => out.push(Member {
                name: format!("{prefix}{}", name.unwrap_or_else(|| "(anonymous)".into())),
                offset,
                size: size_of(btf, &ty),
                type_name: display_name(&ty),
            }),
        }
    }
}

/// Looks up `struct NAME` in the running kernel's BTF.
pub fn kernel_struct(name: &str) -> Result<KernelStruct, DebugInfoError> {
    let btf = Btf::from_vmlinux().map_err(|e| {
        DebugInfoError::KernelBtf(format!(
            "cannot load /sys/kernel/btf/vmlinux ({e}); the kernel needs CONFIG_DEBUG_INFO_BTF=y"
        ))
    })?;
    let found = btf.type_by_name::<BtfType<'_>>(name).and_then(|t| {
        Composite::try_from(t.skip_mods_and_typedefs())
            .ok()
            .map(|c| (t, c))
    });
    let Some((ty, comp)) = found else {
        return Err(DebugInfoError::KernelBtf(format!(
            "no struct or union named {name:?} in the running kernel (check the spelling: e.g. mm_struct, task_struct)"
        )));
    };
    let mut members = Vec::new();
    flatten(&btf, &comp, 0, "", 0, &mut members);
    members.sort_by_key(|m| m.offset);
    Ok(KernelStruct {
        name: display_name(&ty.skip_mods_and_typedefs()),
        size: size_of(&btf, &ty),
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mm_struct_is_flattened_with_mmap_lock() {
        if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            eprintln!("skipped: this kernel has no BTF");
            return;
        }
        let s = kernel_struct("mm_struct").unwrap();
        assert!(s.size >= 512, "{s:?}");
        let lock = s
            .members
            .iter()
            .find(|m| m.name == "mmap_lock")
            .expect("mmap_lock at top level");
        assert!(lock.type_name.contains("rw_semaphore"), "{lock:?}");
        assert!(lock.offset > 0 && lock.offset < s.size);
        assert!(kernel_struct("no_such_struct_xyz").is_err());
    }
}
