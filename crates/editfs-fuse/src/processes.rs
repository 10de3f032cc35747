//! Which processes hold a file open, and which may share a process's
//! descriptors: read from /proc, to tell the last close of a file written
//! through the mount from one a sibling process still writes after.

/// Whether process `pid`, closing a descriptor of node `ino`, holds no other one:
/// `bash` opens a redirection and moves it onto descriptor 1, closing the first
/// one before anything is written, so only a close that leaves none behind ends
/// an unwritten payload. Unknown (another user's process) counts as not last:
/// the empty payload is then sent at release.
pub(super) fn last_close(pid: u32, ino: u64) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return false;
    };
    let want = format!("ino:\t{ino}");
    !fds.flatten().any(|fd| {
        std::fs::read_to_string(fd.path()).is_ok_and(|info| info.lines().any(|l| l == want))
    })
}

/// The processes that may share thread `pid`'s descriptors by inheritance:
/// its process's parent and every process it forked, found through each
/// thread's `children` list, so nothing scans the whole of /proc at a close.
/// `None` when a list cannot be read (another user's process, a kernel
/// without those lists): the caller then cannot rule them out.
pub(super) fn kin(pid: u32) -> Option<Vec<u32>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    let (tgid, parent) = (field("Tgid:")?, field("PPid:")?);
    let mut kin = vec![parent];
    let mut born = vec![tgid];
    while let Some(p) = born.pop() {
        for child in children(p)? {
            if child != tgid && !kin.contains(&child) {
                kin.push(child);
                born.push(child);
            }
        }
    }
    Some(kin)
}

/// The processes process `pid` forked, from the `children` list of each of its threads.
fn children(pid: u32) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let list = std::fs::read_to_string(task.path().join("children")).ok()?;
        out.extend(
            list.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    Some(out)
}
