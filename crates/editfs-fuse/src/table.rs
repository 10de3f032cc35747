//! The editfs mounts the kernel's mount table shows, for `editfs list`.

use std::path::PathBuf;

/// One editfs mount, as /proc/self/mountinfo lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Listed {
    pub mountpoint: PathBuf,
    /// SOURCE, from the mount's name (`editfs:SOURCE`); the name itself when
    /// `-o fsname=` gave another.
    pub source: String,
    /// The mount's options as the kernel shows them (`ro`, `allow_other`, …).
    pub options: Vec<String>,
    /// Whether its daemon answers: a killed daemon leaves a mount that does not.
    pub serving: bool,
}

/// Every editfs mount in this process's mount namespace, oldest first.
pub fn mounts() -> Vec<Listed> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    parse(&table)
        .into_iter()
        .map(|mut m| {
            m.serving = !matches!(
                rustix::fs::statfs(&m.mountpoint),
                Err(rustix::io::Errno::NOTCONN)
            );
            m
        })
        .collect()
}

/// The editfs entries of a mountinfo table (`serving` left true).
fn parse(table: &str) -> Vec<Listed> {
    table
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            let (fstype, name, super_opts) = (right.next()?, right.next()?, right.next()?);
            let ours = fstype == "fuse.editfs" || name.starts_with("editfs:");
            if !ours || !fstype.starts_with("fuse") {
                return None;
            }
            let mut options: Vec<String> = left.get(5)?.split(',').map(str::to_owned).collect();
            let shared = ["allow_other", "default_permissions"];
            options.extend(
                super_opts
                    .split(',')
                    .filter(|o| shared.contains(o))
                    .map(str::to_owned),
            );
            Some(Listed {
                mountpoint: PathBuf::from(super::unescape(left.get(4)?)),
                source: super::unescape(name.strip_prefix("editfs:").unwrap_or(name)),
                options,
                serving: true,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editfs_mounts_are_read_from_the_table_and_others_left_out() {
        let table = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n\
            42 27 0:39 / /mnt/a\\040b rw,nosuid,nodev,relatime - fuse.editfs editfs:/src/p rw,user_id=0,group_id=0,default_permissions,allow_other\n\
            43 27 0:40 / /mnt/c ro,nosuid,nodev - fuse editfs:/src/q ro,user_id=0,group_id=0\n\
            44 27 0:41 / /mnt/d rw - fuse.sshfs host:/x rw\n";
        let found = parse(table);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].mountpoint, PathBuf::from("/mnt/a b"));
        assert_eq!(found[0].source, "/src/p");
        assert!(found[0].options.contains(&"allow_other".to_owned()));
        assert_eq!(found[1].source, "/src/q");
        assert!(found[1].options.contains(&"ro".to_owned()));
    }
}
