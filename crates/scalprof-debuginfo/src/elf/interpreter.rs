//! Whether an ELF file is linked dynamically, from its program headers alone.

use std::path::Path;

/// Whether the ELF file at `path` asks for a program interpreter (a `PT_INTERP` header: it
/// is linked dynamically), read from its first 64 KiB, where linkers put the program
/// headers. `None` where it is no ELF file, or its headers lie beyond.
pub fn has_interpreter(path: &Path) -> Option<bool> {
    use std::io::Read;
    let mut head = Vec::with_capacity(64 << 10);
    crate::open_regular(path)
        .ok()?
        .take(64 << 10)
        .read_to_end(&mut head)
        .ok()?;
    match object::FileKind::parse(&head[..]).ok()? {
        object::FileKind::Elf64 => {
            interpreter_header::<object::elf::FileHeader64<object::Endianness>>(&head)
        }
        object::FileKind::Elf32 => {
            interpreter_header::<object::elf::FileHeader32<object::Endianness>>(&head)
        }
        _ => None,
    }
}

fn interpreter_header<H>(data: &[u8]) -> Option<bool>
where
    H: object::read::elf::FileHeader<Endian = object::Endianness>,
{
    use object::read::elf::ProgramHeader;
    let header = H::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let headers = header.program_headers(endian, data).ok()?;
    Some(
        headers
            .iter()
            .any(|h| h.p_type(endian) == object::elf::PT_INTERP),
    )
}
