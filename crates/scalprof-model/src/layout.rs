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
