//! Reclaiming the store's space: a run and its workload outputs removed, and the file
//! compacted after.

use std::path::PathBuf;

use crate::{outputs_folder, Store, StoreError};

impl Store {
    /// Removes run `id` (its repeats, profiles and lock tables, in one transaction) and its
    /// outputs folder `<store>.d/<id>`; returns the bytes the folder held. Only the folder
    /// scalprof made for the run is removed, never the path a damaged row names.
    pub fn delete_run(&mut self, id: i64) -> Result<u64, StoreError> {
        let tx = self.conn.transaction()?;
        for table in ["repeats", "profiles", "locks"] {
            tx.execute(&format!("DELETE FROM {table} WHERE run_id = ?1"), [id])?;
        }
        let n = tx.execute("DELETE FROM runs WHERE id = ?1", [id])?;
        tx.commit()?;
        if n == 0 {
            return Err(StoreError::NoSuchRun {
                reference: id.to_string(),
                path: self.path.clone(),
            });
        }
        let folder = outputs_folder(&self.path).join(id.to_string());
        let bytes = folder_bytes(&folder);
        match std::fs::remove_dir_all(&folder) {
            Ok(()) => Ok(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(source) => Err(StoreError::RemoveDir {
                path: folder,
                source,
            }),
        }
    }

    /// Outputs folders `<store>.d/<id>` whose run is gone (a run deleted by an older
    /// version, or a recorder killed before its run row was written).
    pub fn orphan_output_folders(&self) -> Result<Vec<PathBuf>, StoreError> {
        let Ok(entries) = std::fs::read_dir(outputs_folder(&self.path)) else {
            return Ok(Vec::new());
        };
        let mut orphans = Vec::new();
        for e in entries.flatten() {
            let Some(id) = e.file_name().to_str().and_then(|n| n.parse::<i64>().ok()) else {
                continue;
            };
            let known: i64 =
                self.conn
                    .query_row("SELECT COUNT(*) FROM runs WHERE id = ?1", [id], |r| {
                        r.get(0)
                    })?;
            if known == 0 && e.file_type().is_ok_and(|t| t.is_dir()) {
                orphans.push(e.path());
            }
        }
        orphans.sort();
        Ok(orphans)
    }

    /// Gives the space of deleted rows back to the file system (SQLite's VACUUM).
    pub fn compact(&self) -> Result<(), StoreError> {
        self.conn.execute_batch("VACUUM")?;
        Ok(())
    }
}

/// Bytes in the files under `dir` (0 when it is missing); links are not followed.
pub fn folder_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => folder_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}
