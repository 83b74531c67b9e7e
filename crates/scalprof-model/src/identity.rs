//! The one identity of a cause: what every join of causes, findings, lock rows and the
//! analysis's series compares, rather than each place choosing which of the kind, the
//! scope and the subject to match.

use crate::locks::{LockRow, Scope};
use crate::{Cause, Finding, FindingKind};

/// A cause as every stage names it: its kind, where it lives (a lock's scope; none for
/// causes that are not a lock or a wait) and its subject as the run document writes it.
/// Two causes, findings or rows are the same cause exactly when their ids are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CauseId<'a> {
    pub kind: FindingKind,
    pub scope: Option<Scope>,
    pub subject: &'a str,
}

impl Cause {
    pub fn id(&self) -> CauseId<'_> {
        CauseId {
            kind: self.kind,
            scope: self.scope,
            subject: &self.subject,
        }
    }
}

impl Finding {
    pub fn id(&self) -> CauseId<'_> {
        CauseId {
            kind: self.kind,
            scope: self.scope,
            subject: &self.subject,
        }
    }
}

impl LockRow {
    /// The cause this row's waits are budgeted as: a blocked wait (sleep, I/O, another
    /// system call, a CPU) or a lock's contention; a reader-writer lock's two sides are
    /// one cause.
    pub fn id(&self) -> CauseId<'_> {
        CauseId {
            kind: if self.lock_type.is_blocked_wait() {
                FindingKind::BlockedWait
            } else {
                FindingKind::LockContention
            },
            scope: Some(self.scope),
            subject: &self.name,
        }
    }
}
