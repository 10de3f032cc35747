//! The engine's work budget (docs/payloads.md#limits): past it a transaction fails as
//! `over_budget`, naming the operation it reached and what to do instead; only
//! the first failing operations are diagnosed; the replacements matches make
//! are bounded by the largest file a transaction may write.

use editfs_engine::{ErrorKind, Options, Outcome, apply};
use proptest::prelude::*;

/// A source file of about `bytes` bytes, of distinct lines.
fn source_of(bytes: usize) -> String {
    let mut s = String::new();
    let mut i = 0;
    while s.len() < bytes {
        s += &format!("    let value_{i} = compute({i}, \"b\"); // line {i}\n");
        i += 1;
    }
    s
}

/// `n` one-line blocks whose SEARCH is in no generated file.
fn misses(n: usize) -> String {
    (0..n)
        .map(|i| format!("<<<<<<< SEARCH\nq{i:04}\n=======\n>>>>>>> REPLACE\n"))
        .collect()
}

#[test]
fn thousands_of_misses_on_a_large_file_fail_as_over_budget_and_say_what_to_do() {
    let file = source_of(1 << 20);
    let edit = apply(
        "big.rs",
        Some(file.as_bytes()),
        misses(2250).as_bytes(),
        &Options::default(),
    );
    assert!(edit.content.is_none());
    let r = &edit.report;
    assert_eq!(r.outcome, Outcome::Failed);
    let e = r.error.as_ref().unwrap();
    assert_eq!(e.kind, ErrorKind::OverBudget, "{e:?}");
    let at = e.operation.unwrap();
    assert!(at > 100 && at < 2250, "stopped at {at}");
    assert!(
        e.message.contains(&format!("operation {at}")),
        "{}",
        e.message
    );
    assert!(e.hint.as_deref().unwrap().contains("split"));
    assert_eq!(r.total, 2250);
    assert_eq!(
        r.operations.len(),
        at,
        "the operations after it did not run"
    );
    let notes = r.notes.join("\n");
    assert!(
        notes.contains(&format!("operations {}-2250 were not run", at + 1)),
        "{notes}"
    );
    assert!(notes.contains("were not diagnosed"), "{notes}");
}

#[test]
fn a_regex_matching_everywhere_stops_at_the_budget_of_its_matches() {
    let file = source_of(1 << 20);
    let payload = r#"{"search": "(\\w)|(\\W)", "replace": "$0$0", "regex": true, "all": true}"#;
    let edit = apply(
        "big.rs",
        Some(file.as_bytes()),
        payload.as_bytes(),
        &Options::default(),
    );
    assert!(edit.content.is_none());
    let e = edit.report.error.unwrap();
    assert_eq!(e.kind, ErrorKind::OverBudget, "{e:?}");
}

#[test]
fn replacements_past_the_largest_file_fail_however_few_the_matches() {
    let file = "a\nb\n".repeat(10);
    let payload = format!(
        r#"{{"search": "a", "replace": "{}", "all": true}}"#,
        "x".repeat(1000)
    );
    let opts = Options {
        max_file: 4096,
        ..Options::default()
    };
    let edit = apply("f.txt", Some(file.as_bytes()), payload.as_bytes(), &opts);
    assert!(edit.content.is_none());
    assert_eq!(edit.report.error.unwrap().kind, ErrorKind::OverBudget);
    // Within the bound, the same edit applies.
    let opts = Options {
        max_file: 1 << 20,
        ..Options::default()
    };
    let edit = apply("f.txt", Some(file.as_bytes()), payload.as_bytes(), &opts);
    assert_eq!(edit.report.outcome, Outcome::Ok, "{:?}", edit.report.error);
}

#[test]
fn a_result_over_the_largest_file_fails_as_too_large() {
    let file = "a\n";
    let payload = format!(
        "<<<<<<< SEARCH\na\n=======\n{}\n>>>>>>> REPLACE\n",
        "x".repeat(5000)
    );
    let opts = Options {
        max_file: 4096,
        ..Options::default()
    };
    let edit = apply("f.txt", Some(file.as_bytes()), payload.as_bytes(), &opts);
    assert!(edit.content.is_none());
    let e = edit.report.error.unwrap();
    assert_eq!(e.kind, ErrorKind::TooLarge, "{e:?}");
    assert!(e.message.contains("--max-file-size"), "{}", e.message);
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(32) })]

    /// Whatever the file and however many blocks miss, at most 8 are diagnosed
    /// (have a closest region), a note counts the others exactly, and nothing
    /// is written.
    #[test]
    fn at_most_eight_misses_are_diagnosed_and_the_rest_are_counted(
        lines in 1usize..400,
        n in 1usize..60,
    ) {
        let file = source_of(lines * 40);
        let payload: String = (0..n)
            .map(|i| format!("<<<<<<< SEARCH\n    let value_{i} = compute({i}, \"c\");\n=======\nx\n>>>>>>> REPLACE\n"))
            .collect();
        let edit = apply("f.rs", Some(file.as_bytes()), payload.as_bytes(), &Options::default());
        prop_assert!(edit.content.is_none());
        let r = &edit.report;
        let failed = r.operations.iter().filter(|o| o.error.is_some()).count();
        let diagnosed = r
            .operations
            .iter()
            .filter(|o| o.error.as_ref().is_some_and(|e| e.closest.is_some()))
            .count();
        prop_assert!(diagnosed <= 8);
        let undiagnosed = r
            .operations
            .iter()
            .filter(|o| o.error.as_ref().is_some_and(|e| e.message.contains("not diagnosed")))
            .count();
        prop_assert_eq!(diagnosed + undiagnosed, failed);
        let note = format!("{undiagnosed} failing operation(s) were not diagnosed");
        prop_assert_eq!(undiagnosed > 0, r.notes.iter().any(|n| n.starts_with(&note)), "{:?}", r.notes);
    }
}
