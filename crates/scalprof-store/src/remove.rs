//! Reclaiming the store's space: a run and its workload outputs removed, and the file
//! compacted after (on PostgreSQL, the space of deleted rows made reusable).

use std::path::PathBuf;

use crate::{Store, StoreError};

impl Store {
    /// Removes run `id` (its repeats, profiles and lock tables, in one transaction) and its
    /// outputs folder `<store>.d/<id>` (on PostgreSQL, this machine's folder of the run in
    /// this store's folder, if it ran here); returns the bytes the folder held. Only the folder
    /// scalprof made for the run is removed, never the path a damaged row names.
    pub fn delete_run(&mut self, id: i64) -> Result<u64, StoreError> {
        let n = self.db.transaction(|db| {
            for table in ["repeats", "profiles", "locks"] {
                db.execute(
                    &format!("DELETE FROM {table} WHERE run_id = ?1"),
                    &[id.into()],
                )?;
            }
            db.execute("DELETE FROM runs WHERE id = ?1", &[id.into()])
        })?;
        if n == 0 {
            return Err(StoreError::NoSuchRun {
                reference: id.to_string(),
                path: self.path.clone(),
            });
        }
        let folder = self.own_outputs()?.join(id.to_string());
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
        let Ok(entries) = std::fs::read_dir(self.own_outputs()?) else {
            return Ok(Vec::new());
        };
        let me = crate::open::euid();
        let mut orphans = Vec::new();
        for e in entries.flatten() {
            let Some(id) = e.file_name().to_str().and_then(|n| n.parse::<i64>().ok()) else {
                continue;
            };
            let known = self
                .db
                .query_opt("SELECT COUNT(*) FROM runs WHERE id = ?1", &[id.into()])?
                .map_or(Ok(0), |r| r.i64(0))?;
            // Only folders of ours (not a link, not another user's).
            let ours = std::fs::symlink_metadata(e.path())
                .is_ok_and(|m| m.is_dir() && std::os::unix::fs::MetadataExt::uid(&m) == me);
            if known == 0 && ours {
                orphans.push(e.path());
            }
        }
        orphans.sort();
        Ok(orphans)
    }

    /// Gives the space of deleted rows back to the file system: SQLite's VACUUM, then a
    /// checkpoint that empties the write-ahead log the VACUUM went through. VACUUM needs
    /// about the store's size free: on a full disk it fails, the deletions stand.
    /// On PostgreSQL a plain VACUUM of the store's tables: the space becomes reusable by
    /// new rows (the files keep their size; VACUUM FULL would lock the team's runs out).
    pub fn compact(&self) -> Result<(), StoreError> {
        self.db.batch(if self.db.is_postgres() {
            "VACUUM runs, repeats, profiles, locks"
        } else {
            "VACUUM; PRAGMA wal_checkpoint(TRUNCATE);"
        })
    }

    /// The store's bytes on disk: the file and its write-ahead log; on PostgreSQL its
    /// tables with their indexes (0 when the server does not say).
    pub fn bytes_on_disk(&self) -> u64 {
        if self.db.is_postgres() {
            return self
                .db
                .query_opt(
                    "SELECT COALESCE(pg_catalog.sum(pg_catalog.pg_total_relation_size(t.rel)), 0)
                            ::bigint
                     FROM (VALUES (pg_catalog.to_regclass('runs')),
                                  (pg_catalog.to_regclass('repeats')),
                                  (pg_catalog.to_regclass('profiles')),
                                  (pg_catalog.to_regclass('locks'))) t(rel)",
                    &[],
                )
                .ok()
                .flatten()
                .and_then(|r| r.i64(0).ok())
                .map_or(0, |b| b.max(0) as u64);
        }
        let size = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
        size(&self.path) + size(&crate::open::wal_path(&self.path))
    }

    /// `<store>.d`, checked again just before anything in it is removed: a folder of ours,
    /// not a link another user put there since the store was opened.
    fn own_outputs(&self) -> Result<PathBuf, StoreError> {
        let folder = self.outputs_folder()?;
        crate::open::refuse_if_theirs(&folder, crate::open::OUTPUTS_WHY)?;
        if std::fs::symlink_metadata(&folder).is_ok_and(|m| !m.is_dir()) {
            return Err(StoreError::OutputsNotAFolder { path: folder });
        }
        Ok(folder)
    }

    /// Removes an outputs folder [`orphan_output_folders`](Store::orphan_output_folders)
    /// found; returns the bytes it held.
    pub fn remove_orphan(&self, folder: &std::path::Path) -> Result<u64, StoreError> {
        let bytes = folder_bytes(folder);
        std::fs::remove_dir_all(folder).map_err(|source| StoreError::RemoveDir {
            path: folder.to_path_buf(),
            source,
        })?;
        Ok(bytes)
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
