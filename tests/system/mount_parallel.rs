//! One slow transaction never blocks transactions on other files.

use crate::common;

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Mount;

/// A payload of `n` JSON searches that each miss somewhere in a 10 MB line:
/// each one scans the whole file, so together they take seconds.
fn slow_payload(n: usize) -> String {
    let ops: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"search": "xxxxy{i}", "replace": "z"}}"#))
        .collect();
    format!("[{}]", ops.join(","))
}

#[test]
fn a_slow_transaction_on_one_file_does_not_delay_an_edit_of_another() {
    let Some(m) = Mount::start(&[], |src| {
        fs::write(src.join("huge.txt"), "x".repeat(10_000_000) + "\n").unwrap();
        fs::write(src.join("small.txt"), "one\n").unwrap();
        fs::write(src.join("slow.json"), slow_payload(150)).unwrap();
    }) else {
        return;
    };
    let mut slow = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "cat {} > huge.txt.edit",
            m.src.join("slow.json").display()
        ))
        .current_dir(&m.mnt)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Time for the slow payload to reach a commit thread (it is sent in one write).
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        slow.try_wait().unwrap().is_none(),
        "the slow transaction was not slow: the test proves nothing"
    );
    let began = Instant::now();
    m.ok_within(
        r#"echo '{"search": "one", "replace": "two"}' | cat > small.txt.edit"#,
        Duration::from_secs(120),
    );
    let small = began.elapsed();
    assert!(
        slow.try_wait().unwrap().is_none(),
        "the small edit ({small:?}) waited until the slow transaction ended"
    );
    assert_eq!(m.src_file("small.txt"), b"two\n");
    let waited = Instant::now();
    while slow.try_wait().unwrap().is_none() {
        assert!(
            waited.elapsed() < Duration::from_secs(300),
            "the slow transaction never ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let report = m.ok("cat huge.txt.status");
    assert!(report.starts_with("FAILED"), "{report}");
}
