//! Where a lock row's lock or wait is (`LockAddress`): a traced address, a sampled row, an
//! array's elements, a system call or a descriptor, written as one string in the run
//! document.

use serde::{Deserialize, Serialize};

use super::run_queue::RunQueueBehind;

/// Where a row's lock or wait is. The run document writes it as one string, as it always
/// has (`0x7f3c…`, `sampled`, `3 elements; busiest +0xb80 60%, …`, `syscall`, `fd 5`);
/// code reads the variant, never the text.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum LockAddress {
    /// The lock word's address, traced (`0x7f3c…`).
    Traced(u64),
    /// Counted from the profile's samples, with no address (`sampled`).
    Sampled,
    /// The elements of one array merged into one row: how many, and the busiest offsets
    /// with their shares of the cost (`+0xb80 60%, +0x40 30%`).
    Array { elements: usize, busiest: String },
    /// A user-space wait in a system call (`syscall`).
    Syscall,
    /// A wait on a file descriptor (`fd 5`).
    Descriptor(u64),
    /// A run-queue row: waiting for a CPU behind whom, or waking an idle one
    /// (`runqueue`, `runqueue:other`, `runqueue:scalprof`, `wakeup:idle`).
    RunQueue(RunQueueBehind),
    /// A kernel-side blocking wait with no lock (`blocked`).
    Blocked,
    /// None known (written empty).
    #[default]
    Unknown,
    /// Anything else, as written.
    Label(String),
}

impl std::fmt::Display for LockAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockAddress::Traced(a) => write!(f, "{a:#x}"),
            LockAddress::Sampled => f.write_str("sampled"),
            LockAddress::Array { elements, busiest } => {
                write!(f, "{elements} elements; busiest {busiest}")
            }
            LockAddress::Syscall => f.write_str("syscall"),
            LockAddress::Descriptor(fd) => write!(f, "fd {fd}"),
            LockAddress::RunQueue(behind) => f.write_str(behind.address()),
            LockAddress::Blocked => f.write_str("blocked"),
            LockAddress::Unknown => Ok(()),
            LockAddress::Label(l) => f.write_str(l),
        }
    }
}

impl LockAddress {
    /// Which run-queue row's address this is, if it is one.
    pub fn run_queue(&self) -> Option<RunQueueBehind> {
        match self {
            LockAddress::RunQueue(behind) => Some(*behind),
            _ => None,
        }
    }

    /// Reads the document's string; what reads back differently is kept as a label, so
    /// that every string writes back as it was.
    pub fn parse(s: &str) -> LockAddress {
        let read = if s.is_empty() {
            LockAddress::Unknown
        } else if s == "sampled" {
            LockAddress::Sampled
        } else if s == "syscall" {
            LockAddress::Syscall
        } else if s == "blocked" {
            LockAddress::Blocked
        } else if let Some(behind) = RunQueueBehind::ALL.into_iter().find(|b| b.address() == s) {
            LockAddress::RunQueue(behind)
        } else if let Some(hex) = s.strip_prefix("0x") {
            u64::from_str_radix(hex, 16).map_or(LockAddress::Label(s.into()), LockAddress::Traced)
        } else if let Some(fd) = s.strip_prefix("fd ") {
            fd.parse()
                .map_or(LockAddress::Label(s.into()), LockAddress::Descriptor)
        } else if let Some((n, busiest)) = s.split_once(" elements; busiest ") {
            n.parse().map_or(LockAddress::Label(s.into()), |elements| {
                LockAddress::Array {
                    elements,
                    busiest: busiest.into(),
                }
            })
        } else {
            LockAddress::Label(s.into())
        };
        if read.to_string() == s {
            read
        } else {
            LockAddress::Label(s.into())
        }
    }
}

impl Serialize for LockAddress {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for LockAddress {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(LockAddress::parse(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::{LockAddress, RunQueueBehind};

    #[test]
    fn a_lock_address_writes_back_as_the_document_had_it() {
        for (text, read) in [
            ("0x7f3c0040", LockAddress::Traced(0x7f3c_0040)),
            ("sampled", LockAddress::Sampled),
            ("syscall", LockAddress::Syscall),
            ("fd 5", LockAddress::Descriptor(5)),
            ("", LockAddress::Unknown),
            (
                "3 elements; busiest +0xb80 60%, +0x40 30%",
                LockAddress::Array {
                    elements: 3,
                    busiest: "+0xb80 60%, +0x40 30%".into(),
                },
            ),
            (
                "wakeup:idle",
                LockAddress::RunQueue(RunQueueBehind::IdleWakeup),
            ),
            ("runqueue", LockAddress::RunQueue(RunQueueBehind::Own)),
            (
                "runqueue:other",
                LockAddress::RunQueue(RunQueueBehind::Other),
            ),
            (
                "runqueue:scalprof",
                LockAddress::RunQueue(RunQueueBehind::Observer),
            ),
            ("blocked", LockAddress::Blocked),
            // Written otherwise than this build writes it: kept as it was.
            ("0x0040", LockAddress::Label("0x0040".into())),
            ("fd x", LockAddress::Label("fd x".into())),
        ] {
            let parsed: LockAddress = serde_json::from_value(serde_json::json!(text)).unwrap();
            assert_eq!(parsed, read, "{text}");
            assert_eq!(
                serde_json::to_value(&parsed).unwrap(),
                serde_json::json!(text)
            );
        }
    }
}
