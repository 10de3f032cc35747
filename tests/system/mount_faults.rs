//! Faults inside the daemon cost the request they hit, never the mount.

use crate::common;

use std::fs;

use common::Mount;

#[test]
fn a_panicking_request_answers_eio_and_the_mount_keeps_serving() {
    let Some(m) = Mount::start(&["--threads", "2"], |src| {
        fs::write(src.join("a"), "one\n").unwrap()
    }) else {
        return;
    };
    // More panics than worker threads: a worker lost to each would leave none.
    for _ in 0..6 {
        let out = m.sh("timeout 10 stat editfs-test-panic");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("Input/output error"), "{err}");
    }
    assert_eq!(m.ok("timeout 10 cat a"), "one\n");
}

/// The process watching the daemon of `m` for a stuck end (`editfs rescue`),
/// waiting a little for it to start.
fn watcher(m: &Mount) -> Option<u32> {
    let began = std::time::Instant::now();
    while began.elapsed() < std::time::Duration::from_secs(5) {
        if let Some(pid) = find_watcher(m) {
            return Some(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

fn find_watcher(m: &Mount) -> Option<u32> {
    let mnt = fs::canonicalize(&m.mnt)
        .ok()?
        .to_string_lossy()
        .into_owned();
    fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<_> = cmdline
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(String::from_utf8_lossy)
            .collect();
        (args.get(1).is_some_and(|a| a == "rescue") && args.last().is_some_and(|a| *a == mnt))
            .then_some(pid)
    })
}

fn gone_within(pid: u32, limit: std::time::Duration) -> bool {
    let began = std::time::Instant::now();
    while began.elapsed() < limit {
        // A zombie has no command line left; the watcher's parent may be dead too.
        let alive = fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty());
        if !alive {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

#[test]
fn a_killed_daemons_watcher_leaves_with_it() {
    let Some(m) = Mount::start(&[], |src| fs::write(src.join("a"), "one\n").unwrap()) else {
        return;
    };
    let w = watcher(&m).expect("a watcher runs beside the daemon");
    let mnt = m.mnt.clone();
    m.stop(rustix::process::Signal::KILL);
    let gone = gone_within(w, std::time::Duration::from_secs(5));
    let _ = std::process::Command::new(env!("CARGO_BIN_EXE_editfs"))
        .arg("unmount")
        .arg(&mnt)
        .status();
    assert!(gone, "the watcher outlived the killed daemon");
}

#[test]
fn the_watcher_leaves_with_a_clean_unmount() {
    let Some(m) = Mount::start(&[], |_| {}) else {
        return;
    };
    let w = watcher(&m).expect("a watcher runs beside the daemon");
    m.stop(rustix::process::Signal::TERM);
    assert!(
        gone_within(w, std::time::Duration::from_secs(5)),
        "the watcher outlived the mount"
    );
}

/// The transaction ids of the log in `state`, in order.
fn logged_txs(state: &std::path::Path) -> Vec<u64> {
    fs::read_to_string(state.join("log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["tx"].as_u64())
        .collect()
}

#[test]
fn a_daemon_killed_before_its_checkpoint_loses_no_edit_and_logs_each_once() {
    let Some(mut m) = Mount::start(&[], |src| fs::write(src.join("a"), "one\n").unwrap()) else {
        return;
    };
    let journal = m.src.join(".editfs/journal");
    let edit = |from: &str, to: &str| {
        m.ok(&format!(
            "printf '<<<<<<< SEARCH\\n{from}\\n=======\\n{to}\\n>>>>>>> REPLACE\\n' > a.edit"
        ));
    };
    edit("one", "two");
    let began = std::time::Instant::now();
    while fs::read_dir(&journal).unwrap().next().is_some() {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(5),
            "the checkpoint never dropped the finished commit's record"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    edit("two", "three");
    m.signal(rustix::process::Signal::KILL);
    m.abort();
    // A killed process holds its journal file's lock until it has exited, and
    // recovery rightly leaves a live process's records to it.
    m.end(rustix::process::Signal::KILL);
    assert_eq!(m.src_file("a"), b"three\n", "close() returned 0");
    // The next transaction on the state directory recovers first.
    let applied = std::process::Command::new(env!("CARGO_BIN_EXE_editfs"))
        .arg("apply")
        .arg(m.src.join("a"))
        .arg("-")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(applied.code(), Some(2), "an empty payload is rejected");
    assert_eq!(m.src_file("a"), b"three\n");
    assert_eq!(fs::read_dir(&journal).unwrap().count(), 0);
    assert_eq!(logged_txs(&m.src.join(".editfs")), [1, 2, 3]);
}
