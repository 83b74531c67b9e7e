//! Cache-line rules for data layouts (`scalprof layout`): which objects share a line,
//! and which sharings put a written lock or atomic next to other data.

use scalprof_model::layout::{is_lock_type_name, DataObject, LaidOutLine, Layout, LineRisk};

/// One cache line of a layout and the objects that overlap it.
pub struct CacheLine<'a> {
    pub start: u64,
    pub objects: Vec<&'a DataObject>,
}

impl CacheLine<'_> {
    /// Whether a member of `o` starts within this line (`size` bytes long).
    fn starts_here(&self, o: &DataObject, offset: u64, size: u64) -> bool {
        let a = o.address + offset;
        a >= self.start && a < self.start + size
    }
}

/// A layout's cache lines, in address order, with the objects on each.
pub fn cache_lines(l: &Layout, line: u64) -> Vec<CacheLine<'_>> {
    let line_of = |a: u64| a / line * line;
    let mut starts: Vec<u64> = Vec::new();
    for o in &l.objects {
        let mut a = line_of(o.address);
        while a < o.address + o.size.max(1) {
            if !starts.contains(&a) {
                starts.push(a);
            }
            a += line;
        }
    }
    starts.sort_unstable();
    starts
        .into_iter()
        .map(|start| CacheLine {
            start,
            objects: l
                .objects
                .iter()
                .filter(|o| o.address < start + line && o.address + o.size.max(1) > start)
                .collect(),
        })
        .collect()
}

/// What is risky about a cache line, if anything.
pub fn line_risk(cl: &CacheLine<'_>, line: u64) -> Option<LineRisk> {
    let hot: Vec<&str> = cl
        .objects
        .iter()
        .filter(|o| o.lock_type || o.atomic_target)
        .map(|o| o.name.as_str())
        .collect();
    if cl.objects.len() >= 2 && !hot.is_empty() {
        return Some(LineRisk::HotObjects {
            line: cl.start,
            others: cl
                .objects
                .iter()
                .map(|o| o.name.as_str())
                .filter(|n| !hot.contains(n))
                .map(String::from)
                .collect(),
            hot: hot.into_iter().map(String::from).collect(),
        });
    }
    let [only] = cl.objects.as_slice() else {
        return None;
    };
    let here: Vec<&scalprof_model::layout::Member> = only
        .members
        .iter()
        .filter(|m| cl.starts_here(only, m.offset, line))
        .collect();
    let locks: Vec<String> = here
        .iter()
        .filter(|m| is_lock_type_name(&m.type_name))
        .map(|m| m.name.clone())
        .collect();
    if locks.len() >= 2 {
        Some(LineRisk::Locks {
            line: cl.start,
            object: only.name.clone(),
            locks,
        })
    } else if only.atomic_target && here.len() >= 2 {
        Some(LineRisk::AtomicFields {
            line: cl.start,
            object: only.name.clone(),
            fields: here.iter().map(|m| m.name.clone()).collect(),
        })
    } else {
        None
    }
}

/// A layout's cache lines, each with the objects on it and its risk: what `scalprof
/// layout` draws.
pub fn lay_out(l: &Layout, line: u64) -> Vec<LaidOutLine> {
    let index: std::collections::HashMap<*const DataObject, usize> = l
        .objects
        .iter()
        .enumerate()
        .map(|(i, o)| (o as *const DataObject, i))
        .collect();
    cache_lines(l, line)
        .iter()
        .map(|cl| LaidOutLine {
            start: cl.start,
            objects: cl
                .objects
                .iter()
                .filter_map(|o| index.get(&(*o as *const DataObject)).copied())
                .collect(),
            risk: line_risk(cl, line),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scalprof_model::layout::Member;

    fn object(name: &str, address: u64, size: u64, members: &[(&str, u64, &str)]) -> DataObject {
        DataObject {
            name: name.into(),
            address,
            size,
            type_name: Some("struct s".into()),
            members: members
                .iter()
                .map(|&(n, offset, t)| Member {
                    name: n.into(),
                    offset,
                    size: 8,
                    type_name: t.into(),
                })
                .collect(),
            atomic_target: false,
            lock_type: false,
        }
    }

    fn layout(objects: Vec<DataObject>) -> Layout {
        Layout {
            objects,
            has_dwarf: true,
            has_symbols: true,
            foreign_architecture: None,
        }
    }

    #[test]
    fn a_written_object_next_to_another_is_flagged() {
        let mut hot = object("counter", 0x4000, 8, &[]);
        hot.atomic_target = true;
        let l = layout(vec![hot, object("config", 0x4008, 8, &[])]);
        let lines = cache_lines(&l, 64);
        assert_eq!(lines.len(), 1);
        assert_eq!(
            line_risk(&lines[0], 64),
            Some(LineRisk::HotObjects {
                line: 0x4000,
                hot: vec!["counter".into()],
                others: vec!["config".into()],
            })
        );
    }

    #[test]
    fn a_laid_out_line_names_its_objects_by_index_and_carries_its_risk() {
        let mut hot = object("counter", 0x4000, 8, &[]);
        hot.atomic_target = true;
        let l = layout(vec![
            object("far", 0x5000, 8, &[]),
            hot,
            object("config", 0x4008, 8, &[]),
        ]);
        let lines = lay_out(&l, 64);
        assert_eq!(lines.len(), 2);
        assert_eq!(
            (lines[0].start, lines[0].objects.clone()),
            (0x4000, vec![1, 2])
        );
        assert!(matches!(lines[0].risk, Some(LineRisk::HotObjects { .. })));
        assert_eq!(
            (lines[1].objects.clone(), lines[1].risk.clone()),
            (vec![0], None)
        );
    }

    #[test]
    fn two_locks_of_one_struct_on_a_line_are_flagged_and_a_quiet_line_is_not() {
        let two = object(
            "tables",
            0x4000,
            128,
            &[
                ("a_lock", 0, "pthread_mutex_t"),
                ("b_lock", 40, "pthread_mutex_t"),
                ("data", 64, "long"),
            ],
        );
        let l = layout(vec![two]);
        let lines = cache_lines(&l, 64);
        assert_eq!(lines.len(), 2);
        assert_eq!(
            line_risk(&lines[0], 64),
            Some(LineRisk::Locks {
                line: 0x4000,
                object: "tables".into(),
                locks: vec!["a_lock".into(), "b_lock".into()],
            })
        );
        assert_eq!(line_risk(&lines[1], 64), None);
    }
}
