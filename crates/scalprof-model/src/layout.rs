//! Data layouts: global variables, their types and members, grouped into cache lines.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Member {
    pub name: String,
    pub offset: u64,
    pub size: u64,
    pub type_name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataObject {
    pub name: String,
    /// Stated address.
    pub address: u64,
    pub size: u64,
    /// `None` without debug info.
    pub type_name: Option<String>,
    pub members: Vec<Member>,
    /// Written by a lock-prefixed (or implicitly locked) instruction found in the binary.
    pub atomic_target: bool,
    /// A lock or atomic by its type (pthread_mutex_t, spinlocks, _Atomic, atomic_*).
    pub lock_type: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    pub objects: Vec<DataObject>,
    pub has_dwarf: bool,
    pub has_symbols: bool,
    /// The binary's architecture when it is not the one scalprof runs on (its atomic
    /// instructions are then not decoded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_architecture: Option<String>,
}

/// A lock or atomic, judged by its type's name (pthread_mutex_t, spinlock_t, _Atomic, …).
pub fn is_lock_type_name(type_name: &str) -> bool {
    let t = type_name.to_ascii_lowercase();
    t.contains("mutex")
        || t.contains("spinlock")
        || t.contains("rwlock")
        || t.contains("atomic")
        || t.contains("lock_t")
}

/// A kernel struct member that is a lock, by its BTF type name (semaphores included).
pub fn is_kernel_lock_member(type_name: &str) -> bool {
    is_lock_type_name(type_name) || type_name.contains("semaphore")
}

/// A cache line whose layout invites false sharing.
#[derive(Clone, Debug, PartialEq)]
pub enum LineRisk {
    /// Objects written by locks or atomics (`hot`) share the line with `others` (or,
    /// when `others` is empty, with each other).
    HotObjects {
        line: u64,
        hot: Vec<String>,
        others: Vec<String>,
    },
    /// Two or more lock members of one object share the line.
    Locks {
        line: u64,
        object: String,
        locks: Vec<String>,
    },
    /// An object written atomically has several fields on the line.
    AtomicFields {
        line: u64,
        object: String,
        fields: Vec<String>,
    },
}

/// One cache line of a laid-out binary, as the analysis judged it: where it starts, the
/// objects that overlap it (indices into [`Layout::objects`], in its order) and what
/// invites false sharing there, if anything.
#[derive(Clone, Debug, PartialEq)]
pub struct LaidOutLine {
    pub start: u64,
    pub objects: Vec<usize>,
    pub risk: Option<LineRisk>,
}

/// A sampled user instruction whose locked write was resolved to a global.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharingSite {
    /// The binary, as the profile names it.
    pub file: String,
    /// The sampled instruction's stated address (a profile's `hot[].address`).
    pub sampled: u64,
    /// The locked instruction's stated address (the sample may skid past it).
    pub ip: u64,
    /// Stated address written (base of the operand plus displacement).
    pub address: u64,
    /// The operand adds an index register: each thread may write its own offset.
    pub indexed: bool,
    /// The global holding `address` (a `DataObject` of `objects` in the same file).
    pub object: String,
    /// The functions the sampled instruction is in, innermost first (inlined ones from
    /// DWARF, then the symbol): the profile names its samples by these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
}

/// A global of a binary, with its layout, that a [`SharingSite`] writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileObject {
    pub file: String,
    pub object: DataObject,
}

/// What the sharing analysis needs from the binaries, read once at the end of a sweep
/// and stored with the run: the findings are then recomputed from these, like every
/// other finding, after the binaries are gone.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SharingInputs {
    /// The cache-line size of the machine that ran the sweep.
    pub line: u64,
    pub sites: Vec<SharingSite>,
    pub objects: Vec<FileObject>,
}
