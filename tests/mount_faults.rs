//! Faults inside the daemon cost the request they hit, never the mount.

mod common;

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
