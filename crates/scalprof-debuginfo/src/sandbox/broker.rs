//! The broker: files a child may not open itself (root's own 0700 binaries) opened by its
//! parent and handed over on a socket pair (SCM_RIGHTS). The parent opens only regular
//! files that are ELF or `perf-PID.map`; a file the child can open, or one that does not
//! exist, costs no question.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;

/// The descriptor an import child asks its parent for files on: the perf.data names
/// binaries, debug files and perf maps that only root may be able to open.
pub(crate) const BROKER_FD: i32 = 4;

static BROKER: std::sync::Mutex<Option<std::os::unix::net::UnixStream>> =
    std::sync::Mutex::new(None);

/// In a child started with a broker: ask the parent from now on when a file is opened.
pub fn use_broker() {
    use_broker_at(BROKER_FD);
}

pub(crate) fn use_broker_at(fd: i32) {
    // SAFETY: the parent put one end of a socket pair on BROKER_FD (see
    // `Parser::spawn_brokered`), and nothing else here owns it.
    let s = unsafe { std::os::unix::net::UnixStream::from_raw_fd(fd) };
    *BROKER.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
}

/// A file opened by the parent, when this is a child with a broker (`None` otherwise).
pub(crate) fn brokered_open(path: &Path) -> Option<std::io::Result<File>> {
    use std::os::unix::ffi::OsStrExt;
    let mut held = BROKER.lock().unwrap_or_else(|e| e.into_inner());
    let sock = held.as_mut()?;
    let bytes = path.as_os_str().as_bytes();
    let mut ask = || -> std::io::Result<File> {
        let mut req = (bytes.len() as u32).to_le_bytes().to_vec();
        req.extend_from_slice(bytes);
        sock.write_all(&req)?;
        let (status, fd) = recv_fd(sock)?;
        if status == 0 {
            let fd = fd.ok_or_else(|| std::io::Error::other("the broker sent no file"))?;
            // SAFETY: a descriptor just received, owned by nothing else.
            return Ok(unsafe { File::from_raw_fd(fd) });
        }
        let mut len = [0u8; 4];
        sock.read_exact(&mut len)?;
        let len = u32::from_le_bytes(len).min(4096) as usize;
        let mut why = vec![0u8; len];
        sock.read_exact(&mut why)?;
        Err(std::io::Error::other(
            String::from_utf8_lossy(&why).into_owned(),
        ))
    };
    Some(ask())
}

/// Serves a child's requests for files until it closes its end. Opens only regular files
/// that are ELF or perf maps: the child parses them, and must not be handed anything else
/// root can read.
pub(super) fn serve_files(mut sock: std::os::unix::net::UnixStream) {
    loop {
        let mut len = [0u8; 4];
        if sock.read_exact(&mut len).is_err() {
            return;
        }
        let len = u32::from_le_bytes(len) as usize;
        if len > 4096 {
            return;
        }
        let mut path = vec![0u8; len];
        if sock.read_exact(&mut path).is_err() {
            return;
        }
        let path: std::path::PathBuf =
            <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(path).into();
        let sent = match open_for_child(&path) {
            Ok(f) => send_fd(&sock, 0, Some(f.as_raw_fd())),
            Err(e) => {
                let why = e.to_string();
                let mut msg = (why.len() as u32).to_le_bytes().to_vec();
                msg.extend_from_slice(why.as_bytes());
                send_fd(&sock, 1, None).and_then(|()| sock.write_all(&msg))
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

fn open_for_child(path: &Path) -> std::io::Result<File> {
    let mut f = crate::open_direct(path)?;
    let perf_map = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("perf-")?.strip_suffix(".map"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
    if !perf_map {
        let mut magic = [0u8; 4];
        f.read_exact(&mut magic)?;
        if magic != *b"\x7fELF" {
            return Err(std::io::Error::other("not an ELF file"));
        }
        use std::io::Seek;
        f.rewind()?;
    }
    Ok(f)
}

/// Sends one status byte, with a descriptor attached (SCM_RIGHTS) when there is one.
/// Written by hand: std has no stable way to pass descriptors.
fn send_fd(
    sock: &std::os::unix::net::UnixStream,
    status: u8,
    fd: Option<i32>,
) -> std::io::Result<()> {
    let mut byte = [status];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: an all-zero msghdr is a valid empty message; the pointers set below point
    // into `iov` and `control`, which outlive the sendmsg call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: the control buffer has room for one header and one int (CMSG_SPACE);
        // CMSG_FIRSTHDR of a message with a control buffer that large is non-null.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<i32>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<i32>(), fd);
        }
    }
    // SAFETY: msg describes valid buffers (see above).
    if unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) } != 1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Receives one status byte and the descriptor attached to it, if any.
fn recv_fd(sock: &std::os::unix::net::UnixStream) -> std::io::Result<(u8, Option<i32>)> {
    let mut byte = [0u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // SAFETY: a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<i32>() as u32) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: as in send_fd: the pointers point into buffers that outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space;
    // SAFETY: msg describes valid buffers.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n != 1 {
        return Err(if n < 0 {
            std::io::Error::last_os_error()
        } else {
            std::io::Error::other("the broker closed")
        });
    }
    let mut fd = None;
    // SAFETY: the kernel filled the control buffer and set msg_controllen; CMSG_FIRSTHDR
    // and CMSG_NXTHDR stay within it.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                fd = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<i32>()));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((byte[0], fd))
}
