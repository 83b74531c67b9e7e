//! Which distribution package installed a binary the profiles could not name, so that
//! the debug-symbol hint names the package to install: on Debian, the package whose file
//! list (`/var/lib/dpkg/info/PKG.list`, what `dpkg -S` reads) has the binary in a program
//! or library folder. `sort` is coreutils'; `liblzma.so.5.4.1` is liblzma5's.

use std::path::Path;

use scalprof_model::PointProfile;

/// Where dpkg keeps each installed package's file list.
const DPKG_INFO: &str = "/var/lib/dpkg/info";

/// (file name, package) for each binary without names in `profile`; empty off Debian.
pub fn of_unnamed(profile: &PointProfile) -> Vec<(String, String)> {
    let unnamed = scalprof_analyze::summary::unnamed_binaries(profile);
    if unnamed.is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = unnamed.iter().map(|(b, _)| b.as_str()).collect();
    owners(Path::new(DPKG_INFO), &names)
}

/// The packages in `info` whose lists have one of `names` in a folder programs or
/// libraries are run from; the first package found for each name.
fn owners(info: &Path, names: &[&str]) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir(info) else {
        return Vec::new();
    };
    let mut lists: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "list"))
        .collect();
    lists.sort();
    let mut found: Vec<(String, String)> = Vec::new();
    for list in lists {
        let Ok(text) = std::fs::read_to_string(&list) else {
            continue;
        };
        for line in text.lines() {
            let Some((dir, file)) = line.rsplit_once('/') else {
                continue;
            };
            if names.contains(&file)
                && is_binary_folder(dir)
                && !found.iter().any(|(f, _)| f == file)
            {
                let stem = list.file_stem().and_then(|s| s.to_str()).unwrap_or("");
                // `liblzma5:amd64.list`: the package, without its architecture.
                let package = stem.split(':').next().unwrap_or(stem);
                found.push((file.to_string(), package.to_string()));
            }
        }
        if found.len() == names.len() {
            break;
        }
    }
    found
}

/// /usr/bin, /bin, /usr/sbin, /sbin, /usr/lib, /lib and their multiarch folders
/// (/usr/lib/x86_64-linux-gnu).
fn is_binary_folder(dir: &str) -> bool {
    let dir = dir.strip_prefix("/usr").unwrap_or(dir);
    match dir {
        "/bin" | "/sbin" | "/lib" | "/lib64" => true,
        _ => dir
            .strip_prefix("/lib/")
            .is_some_and(|arch| !arch.contains('/') && arch.ends_with("-linux-gnu")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_s_package_is_the_one_that_installed_it_where_programs_live() {
        let info = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(info.path().join(name), text).unwrap();
        // The Go sources have a `sort` folder too: not a program.
        write(
            "golang-1.19-src.list",
            "/usr/share/go-1.19/src/sort\n/usr/lib/go-1.19/src/sort\n",
        );
        write("coreutils.list", "/usr/bin\n/usr/bin/sort\n/usr/bin/ls\n");
        write(
            "liblzma5:amd64.list",
            "/usr/lib/x86_64-linux-gnu/liblzma.so.5.4.1\n",
        );
        write("coreutils.md5sums", "/usr/bin/sort\n");
        let mut got = owners(info.path(), &["sort", "liblzma.so.5.4.1", "nowhere"]);
        got.sort();
        assert_eq!(
            got,
            vec![
                ("liblzma.so.5.4.1".to_string(), "liblzma5".to_string()),
                ("sort".to_string(), "coreutils".to_string()),
            ]
        );
        assert!(owners(Path::new("/nonexistent"), &["sort"]).is_empty());
    }
}
