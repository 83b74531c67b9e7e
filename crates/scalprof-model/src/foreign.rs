//! Values others wrote, kept apart from what the user typed.
//!
//! scalprof usually runs as root, and much of what it reads was written by someone else: a
//! shared store's rows (a teammate's), another user's process and files. Such a value is a
//! [`Foreign`]: it can be shown and analysed ([`Foreign::shown`]), but it reaches an action
//! — a program run, a file opened, a process attached to — only through one checked function
//! per action, which takes it whole and says in its name what it checks (the list is in
//! docs/security.md). [`Foreign::into_checked`] is that way out; clippy denies it everywhere
//! else (`clippy.toml`'s `disallowed-methods`), so a new path from a teammate's row to root's
//! `exec` does not compile without a reviewed check.

/// A value from a place others may write (see the module's documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Foreign<T> {
    value: T,
}

impl<T> Foreign<T> {
    /// `value`, as read from a place others may write.
    pub fn new(value: T) -> Foreign<T> {
        Foreign { value }
    }

    /// The value, to show or analyse: never to act on.
    pub fn shown(&self) -> &T {
        &self.value
    }

    /// The value, for the checked function of one action, once its check has passed.
    /// Denied outside those functions (`clippy.toml`).
    pub fn into_checked(self) -> T {
        self.value
    }
}
