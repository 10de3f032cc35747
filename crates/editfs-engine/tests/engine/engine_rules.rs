//! The engine against its rules, one rule per test: docs/payloads.md (formats, what a
//! transaction does, reports).

use editfs_engine::{
    Ambiguity, ErrorReport, OpOutcome, Options, Outcome, Report, apply, sha256_hex,
};

struct Run {
    content: Vec<u8>,
    written: bool,
    report: Report,
}

fn run_with(file: Option<&str>, payload: &str, opts: &Options) -> Run {
    let original = file.map(str::as_bytes);
    let edit = apply("f.txt", original, payload.as_bytes(), opts);
    let written = edit.content.is_some();
    let content = edit
        .content
        .unwrap_or_else(|| original.unwrap_or_default().to_vec());
    Run {
        content,
        written,
        report: edit.report,
    }
}

fn run(file: &str, payload: &str) -> Run {
    run_with(Some(file), payload, &Options::default())
}

/// The error of a payload that must fail as `kind` and leave the file unwritten.
fn refused(file: &str, payload: &str, kind: &str) -> ErrorReport {
    let r = run(file, payload);
    assert_eq!((r.report.outcome, r.written), (Outcome::Failed, false));
    let error = r.report.error.unwrap();
    assert_eq!(error.kind, kind, "{}", error.message);
    error
}

/// Asserts that `text` holds `part`, showing all of `text` when it does not.
#[track_caller]
fn says(text: &str, part: &str) {
    assert!(text.contains(part), "{part:?} is not in:\n{text}");
}

fn text(r: &Run) -> &str {
    std::str::from_utf8(&r.content).unwrap()
}

fn block(search: &str, replace: &str) -> String {
    format!("<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n")
}

fn kind(r: &Run) -> &str {
    r.report.error.as_ref().map_or("", |e| e.kind.as_str())
}

fn warnings(r: &Run) -> String {
    r.report
        .operations
        .iter()
        .flat_map(|o| o.warnings.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

// Payload formats: docs/payloads.md#formats

#[test]
fn fenced_blocks_with_prose_apply_and_note_the_prose() {
    let payload = format!(
        "I'll fix it:\n```rust\n{}```\nThat's all.\n",
        block("a\n", "b\n")
    );
    let r = run("a\n", &payload);
    assert_eq!(text(&r), "b\n");
    assert_eq!(r.report.notes.len(), 1, "{:?}", r.report.notes);
}

#[test]
fn start_line_hint_picks_the_nearest_occurrence() {
    let file = "x\nsame\ny\nsame\nz\nq\nsame\n";
    let payload = "<<<<<<< SEARCH\n:start_line:5\n-------\nsame\n=======\nnew\n>>>>>>> REPLACE\n";
    let r = run(file, payload);
    assert_eq!(text(&r), "x\nsame\ny\nnew\nz\nq\nsame\n");
    assert_eq!(r.report.operations[0].lines, Some([4, 4]));
}

#[test]
fn line_numbers_count_in_the_file_as_read_before_the_transaction() {
    // `retry` at lines 20 and 30; the first block adds 6 lines at line 2.
    let mut lines: Vec<String> = (1..=40).map(|i| format!("x{i}")).collect();
    lines[19] = "retry".into();
    lines[29] = "retry".into();
    let file = lines.join("\n") + "\n";
    let grow = block("x2\n", "x2\na\nb\nc\nd\ne\nf\n");
    let hinted =
        "<<<<<<< SEARCH\n:start_line:30\n-------\nretry\n=======\nsecond\n>>>>>>> REPLACE\n";
    let r = run(&file, &format!("{grow}{hinted}"));
    let out = text(&r);
    assert_eq!(
        out.lines().nth(35),
        Some("second"),
        "the agent's line 30:\n{out}"
    );
    assert_eq!(out.lines().nth(25), Some("retry"));
    says(&warnings(&r), "`:start_line:30` is line 36");
    // An operation below the hinted line moves nothing above it.
    let below = block("x40\n", "x40\nmore\nand more\n");
    let hint20 = hinted.replace(":start_line:30", ":start_line:21");
    let r = run(&file, &format!("{below}{hint20}"));
    assert_eq!(text(&r).lines().nth(19), Some("second"));
    // A hint into lines an earlier block replaced, whose SEARCH is no longer
    // there but only in another copy, fails naming that block.
    let rewrite = block("x19\nretry\nx21\n", "x19\nnow\nthree\nlines\nx21\n");
    let hinted20 = hinted.replace(":start_line:30", ":start_line:20");
    let error = refused(&file, &format!("{rewrite}{hinted20}"), "not_found");
    says(
        &error.message,
        "`:start_line:20` points into lines operation 1 replaced",
    );
    // A JSON scope is moved alike.
    let json = r#"[{"search": "\nx5\n", "replace": "\nx5\na\nb\n"}, {"search": "retry", "replace": "second", "start_line": 29, "end_line": 31}]"#;
    let r = run(&file, json);
    assert_eq!(text(&r).lines().nth(31), Some("second"), "{}", text(&r));
    assert_eq!(text(&r).lines().nth(21), Some("retry"));
}

#[test]
fn json_object_array_and_aliases() {
    assert_eq!(
        text(&run("a b\n", r#"{"search": "a", "replace": "c"}"#)),
        "c b\n"
    );
    let r = run(
        "a b\n",
        r#"[{"old_str": "a", "new_str": "c"}, {"old_string": "b", "new_string": "d"}]"#,
    );
    assert_eq!(text(&r), "c d\n");
}

#[test]
fn markers_too_short_are_named_in_the_rejection() {
    for (payload, named) in [
        ("<<<< SEARCH\na\n====\nb\n>>>> REPLACE\n", "4 `<`"),
        ("--- SEARCH\na\n===\nb\n+++ REPLACE\n", "3 `-`"),
    ] {
        let r = run("a\n", payload);
        assert_eq!(r.report.outcome, Outcome::Rejected);
        assert_eq!(kind(&r), "malformed");
        let error = r.report.error.as_ref().unwrap();
        says(&error.message, named);
        says(&error.message, "payload line 1");
        assert!(error.hint.as_deref().unwrap().contains("5 or more"));
        assert!(!r.written);
    }
}

#[test]
fn a_comment_in_json_is_named_in_the_rejection() {
    for payload in [
        "{\n  // the first one\n  \"old_str\": \"a\", \"new_str\": \"b\"}\n",
        "[{\"old_str\": \"a\", \"new_str\": \"b\"} /* one */]\n",
    ] {
        let r = run("a\n", payload);
        assert_eq!(r.report.outcome, Outcome::Rejected);
        let message = &r.report.error.as_ref().unwrap().message;
        says(message, "JSON has no comments");
        assert!(!r.written);
    }
}

/// JSON written by hand, with the file's line breaks and tabs typed into its
/// strings as they are: they can only mean themselves, so the edit is read.
#[test]
fn line_breaks_and_tabs_typed_into_json_strings_are_read_as_themselves() {
    let file = "build:\n\tcargo build\n\tcp x bin/\n";
    let r = run(
        file,
        "{\"search\": \"build:\n\tcargo build\", \"replace\": \"build:\n\tmkdir -p bin\n\tcargo build\"}\n",
    );
    assert_eq!(
        text(&r),
        "build:\n\tmkdir -p bin\n\tcargo build\n\tcp x bin/\n"
    );
    assert!(
        r.report
            .notes
            .iter()
            .any(|n| n.contains("line breaks or tabs")),
        "{:?}",
        r.report.notes
    );
    // An escape already there stays one, and a JSON still broken is rejected.
    let r = run(
        file,
        "{\"search\": \"\\tcp x bin/\", \"replace\": \"\\tcp x\n\tbin/\"}",
    );
    assert_eq!(text(&r), "build:\n\tcargo build\n\tcp x\n\tbin/\n");
    let r = run(
        file,
        "{\"search\": \"build:\n\", \"replace\": \"say \"hi\"\"}",
    );
    assert_eq!(r.report.outcome, Outcome::Rejected);
}

#[test]
fn a_malformed_payload_is_rejected_naming_its_line() {
    let r = run("a\n", "<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n");
    assert_eq!(r.report.outcome, Outcome::Rejected);
    assert_eq!(kind(&r), "malformed");
    assert!(
        r.report
            .error
            .as_ref()
            .unwrap()
            .message
            .starts_with("payload line 3:")
    );
    assert!(!r.written);
}

#[test]
fn no_block_json_without_search_and_too_large_are_rejected() {
    for (payload, k) in [
        ("just prose\n", "malformed"),
        (r#"{"replace": "x"}"#, "malformed"),
    ] {
        let r = run("a\n", payload);
        assert_eq!(
            (r.report.outcome, kind(&r)),
            (Outcome::Rejected, k),
            "{payload}"
        );
    }
    let opts = Options {
        max_payload: 10,
        ..Options::default()
    };
    let r = run_with(Some("a\n"), &block("a\n", "b\n"), &opts);
    assert_eq!(
        (r.report.outcome, kind(&r)),
        (Outcome::Rejected, "too_large")
    );
}

#[test]
fn a_file_with_conflict_markers_is_edited_with_longer_markers_or_json() {
    let file = "<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n";
    let payload = "<<<<<<<<< SEARCH\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n=========\nours\n>>>>>>>>> REPLACE\n";
    assert_eq!(text(&run(file, payload)), "ours\n");
    let json = r#"{"search": "<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n", "replace": "theirs\n"}"#;
    assert_eq!(text(&run(file, json)), "theirs\n");
}

// What a transaction does: docs/payloads.md#what-a-transaction-does

#[test]
fn operations_run_in_order_on_the_running_result() {
    let payload = format!("{}{}", block("a\n", "b\n"), block("b\n", "c\n"));
    assert_eq!(text(&run("a\n", &payload)), "c\n");
}

#[test]
fn all_or_nothing_when_a_later_operation_fails() {
    let payload = format!("{}{}", block("a\n", "b\n"), block("missing\n", "x\n"));
    let r = run("a\nz\n", &payload);
    assert_eq!(r.report.outcome, Outcome::Failed);
    assert!(!r.written);
    assert_eq!(text(&r), "a\nz\n");
    assert_eq!(r.report.operations[0].outcome, OpOutcome::Matched);
    assert_eq!(r.report.error.as_ref().unwrap().operation, Some(2));
    assert_eq!(r.report.applied, 0);
}

#[test]
fn every_failing_operation_is_reported_at_once() {
    let payload = format!(
        "{}{}{}",
        block("nope\n", "b\n"),
        block("a\n", "b\n"),
        block("never\n", "x\n")
    );
    let r = run("a\n", &payload);
    let failed: Vec<usize> = r
        .report
        .operations
        .iter()
        .filter(|o| o.outcome == OpOutcome::Failed)
        .map(|o| o.index)
        .collect();
    assert_eq!(failed, [1, 3]);
}

#[test]
fn the_indentation_warning_says_which_way_search_is_off() {
    let deeper = run(
        "fn f() {\n    x();\n}\n",
        &block("        x();\n", "        y();\n"),
    );
    says(
        &warnings(&deeper),
        "indented 4 column(s) more than the file",
    );
    let shallower = run("fn f() {\n        x();\n}\n", &block("x();\n", "y();\n"));
    says(
        &warnings(&shallower),
        "indented 8 column(s) less than the file",
    );
}

#[test]
fn search_outside_the_json_scope_is_said_to_be_outside_not_missing() {
    let file: String = (1..=40)
        .map(|i| {
            if i == 30 {
                "go();\n".to_string()
            } else {
                format!("x{i}\n")
            }
        })
        .collect();
    let e = refused(
        &file,
        r#"{"search": "go();", "replace": "stop();", "start_line": 5, "end_line": 9}"#,
        "not_found",
    );
    assert!(
        e.message.contains("not found in lines 5-9") && e.message.contains("line(s) 30"),
        "{}",
        e.message
    );
    assert!(e.hint.unwrap().contains("widen start_line/end_line"));
}

#[test]
fn exact_match_wins_over_tolerant_candidates() {
    let r = run("  foo\nbar\nfoo\n", &block("foo\n", "X\n"));
    assert_eq!(text(&r), "  foo\nbar\nX\n");
    assert_eq!(r.report.operations[0].strategy, Some("exact"));
}

#[test]
fn each_tier_is_named_in_strategy_and_warnings() {
    let cases = [
        (
            "a = 1   \nb\n",
            "a = 1\n",
            "a = 2\n",
            "whitespace",
            "a = 2\nb\n",
        ),
        (
            "\tif x:\n\t\ty()\n",
            "if x:\n    y()\n",
            "if x:\n    z()\n",
            "indentation",
            "\tif x:\n\t\tz()\n",
        ),
        (
            "s = 'it'\n",
            "s = \u{2018}it\u{2019}\n",
            "s = \u{2018}its\u{2019}\n",
            "typography",
            "s = 'its'\n",
        ),
        (
            "a\nb\nc\n",
            "2 | b\n3 | c\n",
            "2 | B\n3 | C\n",
            "line_numbers",
            "a\nB\nC\n",
        ),
    ];
    for (file, s, r, tier, want) in cases {
        let run = run(file, &block(s, r));
        assert_eq!(text(&run), want, "{tier}");
        assert_eq!(run.report.operations[0].strategy, Some(tier));
        assert!(warnings(&run).contains(tier), "{tier}: {}", warnings(&run));
    }
}

#[test]
fn a_tolerant_match_is_used_only_when_unique() {
    refused("foo  \nx\nfoo \n", &block("foo\n", "bar\n"), "ambiguous");
}

#[test]
fn match_exact_turns_the_ladder_off() {
    let opts = Options {
        tolerant: false,
        ..Options::default()
    };
    let r = run_with(Some("a = 1   \n"), &block("a = 1\n", "a = 2\n"), &opts);
    assert_eq!(kind(&r), "not_found");
    assert!(
        r.report
            .error
            .unwrap()
            .hint
            .unwrap()
            .contains("trailing whitespace")
    );
}

#[test]
fn bytes_outside_the_match_never_change() {
    let file = "keep  \r\nold\r\n\tkeep\t\r\n";
    let r = run(file, &block("old\n", "new\n"));
    assert_eq!(text(&r), "keep  \r\nnew\r\n\tkeep\t\r\n");
}

#[test]
fn a_replayed_edit_is_already_applied() {
    let r = run("new\n", &block("old\n", "new\n"));
    assert_eq!(r.report.outcome, Outcome::Ok);
    assert_eq!(r.report.operations[0].outcome, OpOutcome::AlreadyApplied);
    assert!(warnings(&r).contains("already applied"));
    assert!(!r.written);
}

#[test]
fn a_replayed_json_edit_inside_a_line_is_already_applied() {
    let payload = r#"{"search": "bar", "replace": "qux"}"#;
    let first = run("foo bar\n", payload);
    let again = run(text(&first), payload);
    assert_eq!(again.report.outcome, Outcome::Ok);
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
}

#[test]
fn json_replace_gets_crlf_in_a_crlf_file() {
    let r = run("a\r\nb\r\n", r#"{"search": "a", "replace": "x\ny"}"#);
    assert_eq!(text(&r), "x\r\ny\r\nb\r\n");
}

#[test]
fn replay_needs_replace_found_exactly_once() {
    refused("new\nnew\n", &block("old\n", "new\n"), "not_found");
}

#[test]
fn ambiguous_first_replaces_the_first_and_lists_every_line() {
    let opts = Options {
        ambiguous: Ambiguity::First,
        ..Options::default()
    };
    let r = run_with(Some("x\nx\ny\nx\n"), &block("x\n", "z\n"), &opts);
    assert_eq!(text(&r), "z\nx\ny\nx\n");
    says(&warnings(&r), "lines 1, 2, 4");
}

#[test]
fn several_matches_fail_as_ambiguous_listing_every_range_by_default() {
    let file = "fn a() {\n    init();\n}\nfn b() {\n    init();\n}\n";
    let r = run(
        file,
        &block("    init();\n}\n", "    init();\n    go();\n}\n"),
    );
    assert_eq!(r.report.outcome, Outcome::Failed);
    assert_eq!(kind(&r), "ambiguous");
    assert!(!r.written);
    let e = r.report.error.unwrap();
    says(&e.message, "2 times (lines 2-3, 5-6)");
    let hint = e.hint.unwrap();
    for way in [
        ":start_line:",
        "surrounding lines",
        "all",
        "expected_replacements",
    ] {
        assert!(hint.contains(way), "{way}: {hint}");
    }
}

#[test]
fn start_line_hint_resolves_ambiguity_in_the_default_mode() {
    let file = "x\nsame\ny\nsame\n";
    let payload = "<<<<<<< SEARCH\n:start_line:5\n-------\nsame\n=======\nnew\n>>>>>>> REPLACE\n";
    let r = run(file, payload);
    assert_eq!(text(&r), "x\nsame\ny\nnew\n");
    let tie = payload.replace(":start_line:5", ":start_line:3");
    assert_eq!(kind(&run(file, &tie)), "ambiguous");
}

#[test]
fn a_start_line_hint_past_the_end_of_the_file_says_so_when_it_picks_the_last_match() {
    let file = "x\nsame\ny\nsame\n";
    let payload =
        "<<<<<<< SEARCH\n:start_line:99999\n-------\nsame\n=======\nnew\n>>>>>>> REPLACE\n";
    let r = run(file, payload);
    assert_eq!(text(&r), "x\nsame\ny\nnew\n");
    let w = warnings(&r);
    says(&w, "line 99999 is past the end of the file (4 lines)");
    let inside = run(file, &payload.replace("99999", "4"));
    assert!(
        !warnings(&inside).contains("past the end"),
        "{}",
        warnings(&inside)
    );
}

/// Two Go methods with the same body; a unified diff copied from a viewer that
/// shows tabs as four spaces, so its context matches both only by tolerance.
const TWO_CLOSERS: &str = "package store\n\nimport \"errors\"\n\ntype Store struct{ db *DB }\n\nfunc (s *Store) Close() error {\n\tif s.db == nil {\n\t\treturn errors.New(\"closed\")\n\t}\n\treturn s.db.Close()\n}\n\ntype Replica struct{ db *DB }\n\nfunc (s *Replica) Close() error {\n\tif s.db == nil {\n\t\treturn errors.New(\"closed\")\n\t}\n\treturn s.db.Close()\n}\n";

fn flush_hunk(line: usize) -> String {
    format!(
        "--- a/store.go\n+++ b/store.go\n@@ -{line},5 +{line},6 @@ func (s *Replica) Close() error {{\n     if s.db == nil {{\n         return errors.New(\"closed\")\n     }}\n+    s.db.Flush()\n     return s.db.Close()\n }}\n"
    )
}

#[test]
fn a_hunk_whose_context_matches_twice_only_tolerantly_takes_the_one_nearest_its_line() {
    let r = run(TWO_CLOSERS, &flush_hunk(17));
    assert_eq!(r.report.outcome, Outcome::Ok, "{}", r.report);
    let flushed = "\t}\n\ts.db.Flush()\n\treturn s.db.Close()\n}\n";
    let (head, _) = TWO_CLOSERS.rsplit_once("\t}\n").unwrap();
    assert_eq!(text(&r), format!("{head}{flushed}"));
    assert_eq!(r.report.operations[0].strategy, Some("indentation"));
    assert_eq!(r.report.operations[0].lines, Some([17, 21]));
    says(&warnings(&r), "nearest line 17");
    let r = run(TWO_CLOSERS, &flush_hunk(8));
    let flushed = "\t}\n\ts.db.Flush()\n\treturn s.db.Close()\n}\n";
    assert_eq!(r.report.operations[0].lines, Some([8, 12]), "{}", r.report);
    let (first, rest) = text(&r).split_once("\ntype Replica").unwrap();
    assert!(first.ends_with(flushed), "{first}");
    assert!(!rest.contains("Flush"), "{rest}");
}

#[test]
fn a_hint_halfway_between_two_tolerant_matches_picks_none() {
    let payload = "<<<<<<< SEARCH\n:start_line:2\n-------\nfoo\n=======\nbar\n>>>>>>> REPLACE\n";
    let r = run_with(
        Some("foo  \nx\nfoo \n"),
        payload,
        &Options {
            ambiguous: Ambiguity::First,
            ..Options::default()
        },
    );
    assert_eq!(kind(&r), "ambiguous", "{}", r.report);
    assert!(!r.written);
    let r = run("foo  \nx\nfoo \n", &payload.replace(":2", ":3"));
    assert_eq!(text(&r), "foo  \nx\nbar\n");
}

#[test]
fn a_deletion_with_a_typo_in_search_fails_instead_of_passing_as_a_replay() {
    for tolerant in [true, false] {
        let opts = Options {
            tolerant,
            ..Options::default()
        };
        let r = run_with(Some("a\nb\nc\n"), &block("a\nbb\n", "a\n"), &opts);
        assert_eq!(r.report.outcome, Outcome::Failed, "tolerant {tolerant}");
        assert_eq!(kind(&r), "not_found");
        let closest = r.report.error.unwrap().closest.unwrap();
        assert_eq!((closest.start_line, closest.end_line), (1, 2));
    }
}

#[test]
fn a_resent_deletion_between_kept_context_is_a_replay_and_a_mistyped_one_fails() {
    let before = "def a():\n    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n    return 3\n";
    let after = "def a():\n    return 1\n\n\ndef c():\n    return 3\n";
    let deletion = block(
        "    return 1\n\n\ndef b():\n    return 2\n\n\ndef c():\n",
        "    return 1\n\n\ndef c():\n",
    );
    let first = run(before, &deletion);
    assert_eq!(text(&first), after);
    let again = run(after, &deletion);
    assert_eq!(
        again.report.outcome,
        Outcome::Ok,
        "{:?}",
        again.report.error
    );
    assert!(!again.written);
    says(&warnings(&again), "already applied");
    // A typo in the lines to delete leaves them between the context: no replay.
    let typo = deletion.replace("return 2", "return 22");
    assert_eq!(kind(&run(before, &typo)), "not_found");
    // Context on one side alone proves nothing, nor does context of punctuation.
    let one_side = block(
        "    return 2\n\n\ndef c():\n    return 3\n",
        "    return 2\n",
    );
    assert_eq!(kind(&run(after, &one_side)), "not_found");
    let braces = "fn f() {\n    {\n    }\n}\n";
    let r = run(braces, &block("    }\n    x();\n}\n", "    }\n}\n"));
    assert_eq!(kind(&r), "not_found");
}

#[test]
fn a_resent_insertion_is_a_replay_and_never_inserts_twice() {
    let after = block("import os\n", "import os\nimport sys\n");
    let first = run("import os\n\nprint(1)\n", &after);
    assert_eq!(text(&first), "import os\nimport sys\n\nprint(1)\n");
    let again = run(text(&first), &after);
    assert_eq!(again.report.outcome, Outcome::Ok);
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
    assert!(!again.written);
    let before = block("print(1)\n", "# say one\nprint(1)\n");
    let once = run("print(1)\n", &before);
    let twice = run(text(&once), &before);
    assert_eq!(text(&twice), "# say one\nprint(1)\n");
    assert_eq!(
        twice.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
    let json = r#"{"search": "f(a", "replace": "f(a, b"}"#;
    let once = run("f(a)\n", json);
    let twice = run(text(&once), json);
    assert_eq!(text(&twice), "f(a, b)\n");
    assert_eq!(
        twice.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
    // A blank line next to SEARCH proves nothing: inserting one is an edit.
    let blank = run("a\n\nb\n", &block("a\n", "a\n\n"));
    assert_eq!(text(&blank), "a\n\n\nb\n");
}

#[test]
fn a_copy_of_replace_elsewhere_is_no_replay_and_fails_at_the_stale_region() {
    let search = "def scale(x):\n    factor = 2\n    return x * factor\n";
    let replace = "def scale(x):\n    factor = 3\n    return x * factor\n";
    let stale = "def scale(x):\n    factor = 5\n    return x * factor\n";
    let exact_copy = format!("{stale}\n\nclass Old:\n    pass\n\n\n{replace}");
    let deeper_copy = format!(
        "{stale}\n\nclass Twin:\n    def scale(x):\n        factor = 3\n        return x * factor\n"
    );
    for file in [exact_copy, deeper_copy] {
        let r = run(&file, &block(search, replace));
        assert_eq!(r.report.outcome, Outcome::Failed, "{file}");
        assert_eq!(kind(&r), "not_found");
        let e = r.report.error.unwrap();
        let closest = e.closest.unwrap();
        assert_eq!((closest.start_line, closest.end_line), (1, 3), "{file}");
        assert!(e.hint.unwrap().contains("REPLACE's text is at file lines"));
    }
}

#[test]
fn replace_found_where_search_resembles_nothing_is_no_replay_when_it_resembles_more_elsewhere() {
    // REPLACE stands once in the file, but SEARCH never was there: another
    // line, though only a little like SEARCH, is more like it than REPLACE's.
    let file = "//! Docs.\n\n// Helpers that are unrelated.\n\npub mod ast;\npub mod hir;\n";
    let r = run(
        file,
        &block("fn completely_unrelated() { xyz }\n", "pub mod ast;\n"),
    );
    assert_eq!(
        r.report.outcome,
        Outcome::Failed,
        "{:?}",
        r.report.operations
    );
    assert_eq!(kind(&r), "not_found");
    let e = r.report.error.unwrap();
    assert!(
        e.hint
            .unwrap()
            .contains("REPLACE's text is at file lines 5-5")
    );
}

#[test]
fn replace_found_where_search_resembles_nothing_at_all_is_no_replay() {
    let file = "//! Docs.\n\npub mod ast;\npub mod hir;\n";
    let r = run(file, &block("qqqq\n", "pub mod ast;\n"));
    assert_eq!(
        r.report.outcome,
        Outcome::Failed,
        "{:?}",
        r.report.operations
    );
    assert!(
        r.report
            .error
            .unwrap()
            .hint
            .unwrap()
            .contains("SEARCH does not resemble it")
    );
    // Alone in its file, REPLACE's place is SEARCH's closest region: a replay.
    let r = run("new\n", &block("old\n", "new\n"));
    assert_eq!(r.report.operations[0].outcome, OpOutcome::AlreadyApplied);
}

#[test]
fn a_genuine_replay_of_a_rewrite_still_succeeds() {
    let payload = block(
        "def area(r):\n    return 3.14 * r * r\n",
        "def area(r):\n    return math.pi * r ** 2\n",
    );
    let file =
        "import math\n\ndef area(r):\n    return 3.14 * r * r\n\ndef other():\n    return 3\n";
    let first = run(file, &payload);
    let again = run(text(&first), &payload);
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
    assert_eq!(again.report.operations[0].lines, Some([3, 4]));
}

#[test]
fn front_matter_after_a_start_line_hint_stays_search_text() {
    let file = "---\nlayout: post\ntitle: Old title\n---\n\n# Old title\n\nBody.\n";
    let payload = "<<<<<<< SEARCH\n:start_line:1\n-------\n---\nlayout: post\ntitle: Old title\n---\n=======\n---\nlayout: post\ntitle: New title\n---\n>>>>>>> REPLACE\n";
    let r = run(file, payload);
    assert_eq!(
        text(&r),
        "---\nlayout: post\ntitle: New title\n---\n\n# Old title\n\nBody.\n"
    );
    assert_eq!(r.report.operations[0].lines, Some([1, 4]));
    assert_eq!(r.report.operations[0].strategy, Some("exact"));
}

#[test]
fn ambiguous_error_mode_fails_instead() {
    let opts = Options {
        ambiguous: Ambiguity::Error,
        ..Options::default()
    };
    let r = run_with(Some("x\nx\n"), &block("x\n", "z\n"), &opts);
    assert_eq!(kind(&r), "ambiguous");
    assert!(
        r.report
            .error
            .unwrap()
            .message
            .contains("2 times (lines 1, 2)")
    );
}

#[test]
fn crlf_file_takes_lf_blocks_and_stays_crlf() {
    let r = run("a\r\nb\r\n", &block("a\n", "x\ny\n"));
    assert_eq!(text(&r), "x\r\ny\r\nb\r\n");
    let r = run("a\r\nb\r\n", r#"{"search": "a\nb", "replace": "c\nd"}"#);
    assert_eq!(text(&r), "c\r\nd\r\n");
}

/// An agent that copies a CRLF file's `\r\n` into a JSON `search` but writes
/// `replace` with `\n` alone does not mean LF lines: the file stays CRLF, as
/// it does for an LF-only SEARCH.
#[test]
fn a_crlf_search_with_an_lf_replace_keeps_the_file_crlf() {
    let r = run(
        "x = 1\r\ny = 2\r\n",
        r#"{"search": "x = 1\r\n", "replace": "x = 1\ny = 3\n"}"#,
    );
    assert_eq!(text(&r), "x = 1\r\ny = 3\r\ny = 2\r\n");
    // A `\r` in REPLACE itself is taken as written.
    let r = run(
        "x = 1\r\ny = 2\r\n",
        r#"{"search": "x = 1\r\n", "replace": "x = 1\r\ny = 3\n"}"#,
    );
    assert_eq!(text(&r), "x = 1\r\ny = 3\ny = 2\r\n");
}

#[test]
fn bom_and_final_newline_are_preserved() {
    let r = run("\u{feff}a\nb", &block("b\n", "c\n"));
    assert_eq!(text(&r), "\u{feff}a\nc");
    let r = run("\u{feff}a\n", &block("a\n", "b\n"));
    assert_eq!(text(&r), "\u{feff}b\n");
}

#[test]
fn empty_search_creates_a_missing_or_empty_file_only() {
    let r = run_with(None, &block("", "hello\n"), &Options::default());
    assert_eq!((text(&r), r.written), ("hello\n", true));
    assert_eq!(r.report.operations[0].strategy, Some("create"));
    assert_eq!(text(&run("", &block("", "x\n"))), "x\n");
    let r = run("content\n", &block("", "x\n"));
    assert_eq!(
        (r.report.outcome, kind(&r)),
        (Outcome::Failed, "file_exists")
    );
    // A create sent again, of a file that reads exactly as sent, is a replay:
    // nothing written, the file's own line endings kept.
    let again = run(
        "hello\r\n",
        "*** Begin Patch\n*** Add File: f.txt\n+hello\n*** End Patch\n",
    );
    assert_eq!(
        again.report.outcome,
        Outcome::Ok,
        "{:?}",
        again.report.error
    );
    assert!(!again.written);
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
    says(&warnings(&again), "already applied");
    let other = refused("content\n", &block("", "x\n"), "file_exists");
    assert!(!other.message.contains("exactly"), "{}", other.message);
}

#[test]
fn search_equal_to_replace_is_a_warning_not_a_failure() {
    let r = run("a\n", &block("a\n", "a\n"));
    assert_eq!(r.report.outcome, Outcome::Ok);
    assert_eq!(r.report.operations[0].outcome, OpOutcome::Unchanged);
    assert!(warnings(&r).contains("identical"));
}

#[test]
fn regex_with_numbered_and_named_groups() {
    let payload = r#"{"search": "fn (\\w+)\\((?P<arg>\\w+)\\)", "replace": "fn ${1}_v2(${arg}: u8)", "regex": true}"#;
    let r = run("fn go(x)\n", payload);
    assert_eq!(text(&r), "fn go_v2(x: u8)\n");
    assert_eq!(r.report.operations[0].strategy, Some("regex"));
}

#[test]
fn a_regex_replacement_naming_a_group_the_regex_lacks_is_rejected() {
    // The regex crate reads `$1x` as the group named `1x` and expands a group that
    // does not exist to nothing: `Some(ok)` would become `Some()`, reported as ok.
    for (replace, names) in [("Some($1x)", "`$1x`"), ("$2", "`$2`"), ("${nm}", "`${nm}`")] {
        let payload =
            format!(r#"{{"search": "Some\\((\\w+)\\)", "replace": "{replace}", "regex": true}}"#);
        let r = run("let a = Some(ok);\n", &payload);
        assert_eq!(r.report.outcome, Outcome::Rejected, "{replace}");
        assert_eq!(kind(&r), "malformed");
        let message = &r.report.error.as_ref().unwrap().message;
        says(message, names);
        assert!(!r.written);
    }
    let message = run(
        "let a = Some(ok);\n",
        r#"{"search": "Some\\((\\w+)\\)", "replace": "Some($1x)", "regex": true}"#,
    )
    .report
    .error
    .unwrap()
    .message;
    says(&message, "${1}x");
    // Groups that exist, `$$` and a `$` before no name still apply.
    let r = run(
        "let a = Some(ok);\n",
        r#"{"search": "Some\\((?P<v>\\w+)\\)", "replace": "Some(${1}x, $v, $$, $)", "regex": true}"#,
    );
    assert_eq!(text(&r), "let a = Some(okx, ok, $, $);\n");
}

#[test]
fn regex_runs_in_linear_time() {
    let file = format!("{}b\n", "a".repeat(50_000));
    let start = std::time::Instant::now();
    refused(
        &file,
        r#"{"search": "(a+)+$", "replace": "x", "regex": true}"#,
        "not_found",
    );
    // A backtracking engine would not finish this in the age of the universe.
    assert!(start.elapsed().as_secs() < 10);
}

#[test]
fn ignore_case_literal() {
    let r = run(
        "Hello World\n",
        r#"{"search": "hello world", "replace": "bye", "ignore_case": true}"#,
    );
    assert_eq!(text(&r), "bye\n");
}

#[test]
fn if_match_is_a_compare_and_swap() {
    let sha = sha256_hex(b"a\n");
    let ok = run(
        "a\n",
        &format!(r#"{{"search": "a", "replace": "b", "if_match": "{sha}"}}"#),
    );
    assert_eq!(text(&ok), "b\n");
    let stale = run(
        "a\n",
        &format!(
            r#"{{"search": "a", "replace": "b", "if_match": "{}"}}"#,
            "0".repeat(64)
        ),
    );
    assert_eq!(
        (stale.report.outcome, kind(&stale)),
        (Outcome::Failed, "stale")
    );
    assert!(stale.report.error.unwrap().message.contains(&sha));
}

#[test]
fn a_stale_report_has_one_operation_object_per_operation() {
    let payload = format!(
        r#"[{{"search": "a", "replace": "b"}}, {{"search": "zz", "replace": "y", "if_match": "{}"}}]"#,
        "0".repeat(64)
    );
    let r = run(
        "a
", &payload,
    );
    assert_eq!(kind(&r), "stale");
    let outcomes: Vec<_> = r.report.operations.iter().map(|o| o.outcome).collect();
    assert_eq!(outcomes, [OpOutcome::Matched, OpOutcome::Failed]);
    let second = r.report.operations[1].error.as_ref().unwrap();
    assert_eq!(second.kind.as_str(), "stale");
    assert!(!r.written);
}

#[test]
fn non_utf8_files_take_byte_exact_edits_only() {
    let file: &[u8] = b"caf\xe9 = 1\nx = 2\n";
    let edit = apply(
        "f",
        Some(file),
        block("x = 2\n", "x = 3\n").as_bytes(),
        &Options::default(),
    );
    assert_eq!(edit.content.unwrap(), b"caf\xe9 = 1\nx = 3\n");
    let edit = apply(
        "f",
        Some(file),
        block("x = 2   \n", "x = 3\n").as_bytes(),
        &Options::default(),
    );
    assert_eq!(edit.report.error.unwrap().kind, "not_text");
    let edit = apply(
        "f",
        Some(file),
        br#"{"search": "x", "replace": "y", "regex": true}"#,
        &Options::default(),
    );
    assert_eq!(edit.report.error.unwrap().kind, "not_text");
}

#[test]
fn json_search_matches_inside_a_line() {
    assert_eq!(
        text(&run(
            "let x = old_name(1);\n",
            r#"{"search": "old_name", "replace": "new_name"}"#
        )),
        "let x = new_name(1);\n"
    );
}

#[test]
fn an_operation_that_replaces_several_places_says_how_many() {
    let file = "f(1)\nx\nf(2)\nf(3)\n";
    let r = run(
        file,
        r#"{"search": "f\\(", "replace": "g(", "regex": true, "all": true}"#,
    );
    assert_eq!(text(&r), "g(1)\nx\ng(2)\ng(3)\n");
    says(&warnings(&r), "3 occurrences replaced (lines 1, 3, 4)");
    let r = run(file, r#"{"search": "x", "replace": "y"}"#);
    assert!(!warnings(&r).contains("occurrences"), "{}", warnings(&r));
}

#[test]
fn a_tolerant_match_replaced_in_several_places_says_how_many() {
    let file = "a = 1\nb\na = 1\n";
    let r = run(
        file,
        r#"{"search": "a = 1  \n", "replace": "a = 2\n", "expected_replacements": 2}"#,
    );
    assert_eq!(text(&r), "a = 2\nb\na = 2\n");
    assert_eq!(r.report.operations[0].strategy, Some("whitespace"));
    says(&warnings(&r), "2 occurrences replaced (lines 1, 3)");
}

#[test]
fn json_scope_all_and_expected_count() {
    let file = "a\na\na\na\n";
    let r = run(
        file,
        r#"{"search": "a", "replace": "b", "start_line": 2, "end_line": 3, "all": true}"#,
    );
    assert_eq!(text(&r), "a\nb\nb\na\n");
    let r = run(
        file,
        r#"{"search": "a", "replace": "b", "expected_replacements": 4}"#,
    );
    assert_eq!(text(&r), "b\nb\nb\nb\n");
    refused(
        file,
        r#"{"search": "a", "replace": "b", "expected_replacements": 2}"#,
        "count_mismatch",
    );
}

// Reports: docs/payloads.md#reports

#[test]
fn the_json_report_has_every_field_the_contract_lists() {
    let ok = run("a\nb\n", &block("a\n", "c\n"));
    let v: serde_json::Value = serde_json::from_str(&ok.report.to_json()).unwrap();
    // `tx` and `time` are the transaction's, which reports the engine's fields.
    for field in [
        "file",
        "outcome",
        "applied",
        "total",
        "operations",
        "diff",
        "sha256",
    ] {
        assert!(v.get(field).is_some(), "{field} missing from {v}");
    }
    let op = &v["operations"][0];
    assert_eq!(op["index"], 1);
    assert_eq!(op["outcome"], "applied");
    assert_eq!(op["strategy"], "exact");
    assert_eq!(op["lines"], serde_json::json!([1, 1]));
    assert!(op["warnings"].is_array());
    assert_eq!(v["sha256"], sha256_hex(b"c\nb\n"));
    assert!(v["diff"].as_str().unwrap().contains("-a\n+c\n"));

    let failed = run("alpha\nbeta\n", &block("alpha\nbeta2\n", "x\n"));
    let v: serde_json::Value = serde_json::from_str(&failed.report.to_json()).unwrap();
    assert_eq!(v["outcome"], "failed");
    let e = &v["error"];
    assert_eq!(e["kind"], "not_found");
    assert_eq!(e["operation"], 1);
    assert!(e["message"].is_string() && e["hint"].is_string());
    assert_eq!(e["closest"]["start_line"], 1);
    assert_eq!(e["closest"]["end_line"], 2);
    assert!(e["closest"]["similarity"].as_f64().unwrap() > 0.8);
    assert!(
        e["closest"]["diff"]
            .as_str()
            .unwrap()
            .contains("-beta2\n+beta\n")
    );
}

#[test]
fn the_text_report_says_what_happened_and_how_to_fix_a_miss() {
    let r = run(
        "def f():\n    return 1\n",
        &block("def f():\n    return 2\n", "def f():\n    return 3\n"),
    );
    let text = r.report.to_string();
    assert!(text.starts_with("FAILED f.txt"), "{text}");
    says(&text, "nothing was changed");
    says(
        &text,
        "hint: file line 2 column 12 vs SEARCH line 2: one character differs",
    );
    says(&text, "closest match: lines 1-2");
}

#[test]
fn a_closest_region_that_differs_is_never_reported_as_fully_similar() {
    let file = "    def _split_chunks(self, text):\n        text = self._munge_whitespace(text)\n        return self._split(text)\n";
    let search = file.replace("_munge_whitespace", "_munge_whitespaces");
    let r = run(file, &block(&search, "pass\n"));
    let closest = r.report.error.as_ref().unwrap().closest.clone().unwrap();
    assert!(closest.similarity < 1.0, "{}", closest.similarity);
    let text = r.report.to_string();
    says(&text, "(similarity 0.99)");
}

#[test]
fn line_number_prefixes_that_disagree_with_the_file_are_named_in_the_hint() {
    let file = "a = 1\nb = 2\nc = 3\n";
    let r = run(
        file,
        &block("12 | b = 2\n13 | c = 3\n", "12 | b = 20\n13 | c = 3\n"),
    );
    assert_eq!(kind(&r), "not_found");
    let hint = r.report.error.unwrap().hint.unwrap();
    says(
        &hint,
        "SEARCH's line-number prefixes say lines 12-13, but the text is at lines 2-3",
    );
}

#[test]
fn a_block_written_against_lines_an_earlier_block_changed_says_so() {
    let file = "def f(text):\n    text = g(text)\n    return h(text)\n";
    let payload = block("    text = g(text)\n", "    text = g(text)  # A\n")
        + &block(
            "    text = g(text)\n    return h(text)\n",
            "    text = g(text)\n    return list(h(text))\n",
        );
    let r = run(file, &payload);
    assert_eq!(kind(&r), "not_found");
    let hint = r.report.error.unwrap().hint.unwrap();
    says(
        &hint,
        "matches the file as it was before operation #1 changed it",
    );
    // A SEARCH that never matched gets no such note.
    let typo = block("    text = g(text)\n", "    text = g(text)  # A\n")
        + &block("def f(txt):\n", "def f(t):\n");
    let r = run(file, &typo);
    assert!(
        !r.report
            .error
            .unwrap()
            .hint
            .unwrap()
            .contains("before operation")
    );
}

// Payload shapes that would destroy code, and the last two tiers:
// docs/payloads.md#what-a-transaction-does

#[test]
fn a_placeholder_in_replace_is_refused_naming_it_and_the_lines_it_would_delete() {
    let file = "function total(items) {\n  let sum = 0;\n  for (const i of items) {\n    sum += i.price;\n  }\n  return sum;\n}\n";
    let payload = block(
        "function total(items) {\n  let sum = 0;\n  for (const i of items) {\n    sum += i.price;\n  }\n  return sum;\n}\n",
        "function total(items) {\n  let sum = 0.0;\n  // ... rest unchanged ...\n}\n",
    );
    let e = refused(file, &payload, "placeholder");
    says(&e.message, "REPLACE line 3 `// ... rest unchanged ...`");
    says(&e.message, "SEARCH lines 2-6");
}

#[test]
fn a_bare_ellipsis_standing_for_a_docstring_is_refused() {
    let file = "def area(r):\n    \"\"\"Area of a circle.\n\n    r: the radius.\n    \"\"\"\n    return 3.14 * r * r\n";
    let payload = block(
        "def area(r):\n    \"\"\"Area of a circle.\n\n    r: the radius.\n    \"\"\"\n    return 3.14 * r * r\n",
        "def area(r):\n    ...\n    return math.pi * r * r\n",
    );
    let r = run(file, &payload);
    assert_eq!(kind(&r), "placeholder");
    assert_eq!(text(&r), file);
}

#[test]
fn python_ellipsis_for_one_line_and_added_placeholder_comments_still_apply() {
    let r = run("def f():\n    pass\n", &block("    pass\n", "    ...\n"));
    assert_eq!(text(&r), "def f():\n    ...\n");
    let r = run("x = 1\n", &block("x = 1\n", "x = 1\n# ... more to come\n"));
    assert_eq!(text(&r), "x = 1\n# ... more to come\n");
}

#[test]
fn aiders_same_ellipsis_form_applies_each_piece_in_order() {
    let file = "fn a() {\n    one();\n}\n\nfn b() {\n    two();\n}\n\nfn c() {\n    three();\n}\n";
    let payload = block(
        "fn a() {\n    one();\n...\n    three();\n}\n",
        "fn a() {\n    uno();\n...\n    tres();\n}\n",
    );
    let r = run(file, &payload);
    assert_eq!(
        text(&r),
        "fn a() {\n    uno();\n}\n\nfn b() {\n    two();\n}\n\nfn c() {\n    tres();\n}\n"
    );
    assert_eq!(r.report.operations[0].strategy, Some("elided"));
    let twice = "fn a() {\n    one();\n}\nfn a() {\n    one();\n}\n    three();\n}\n";
    let r = run(twice, &payload);
    // Several matches of a piece are `ambiguous`, with their lines and a hint that
    // says how to make the piece unique (not that the lines differ: they do not).
    assert_eq!(kind(&r), "ambiguous");
    let error = r.report.error.unwrap();
    says(&error.message, "piece 1");
    says(&error.message, "lines 1-2, 4-5");
    let hint = error.hint.unwrap();
    says(&hint, "unique");
    assert!(!hint.contains("not tolerated"), "{hint}");
    // A piece found only before the piece ahead of it says so.
    let reversed = "fn c() {\n    three();\n}\nfn a() {\n    one();\n}\n";
    let error = refused(reversed, &payload, "not_found");
    says(&error.message, "piece 2");
    assert!(error.hint.unwrap().contains("order"));
}

#[test]
fn a_search_that_elides_lines_fails_with_a_hint() {
    let file = "def f():\n    a = 1\n    b = 2\n    return a + b\n";
    let r = run(
        file,
        &block(
            "def f():\n    # ... existing code ...\n    return a + b\n",
            "def f():\n    return 0\n",
        ),
    );
    assert_eq!(kind(&r), "not_found");
    assert!(r.report.error.unwrap().hint.unwrap().contains("elided"));
}

#[test]
fn ragged_indentation_matches_when_unique_and_keeps_the_files_indentation() {
    // Copied from a viewer: the first line lost its indentation.
    let file = "impl Shape {\n    fn area(&self) -> f64 {\n        if self.r > 0.0 {\n            self.r * self.r\n        } else {\n            0.0\n        }\n    }\n}\n";
    let payload = block(
        "fn area(&self) -> f64 {\n        if self.r > 0.0 {\n            self.r * self.r\n",
        "fn area(&self) -> f64 {\n        if self.r > 0.0 {\n            PI * self.r * self.r\n",
    );
    let r = run(file, &payload);
    assert_eq!(r.report.operations[0].strategy, Some("ragged"));
    assert_eq!(
        text(&r),
        file.replace(
            "            self.r * self.r",
            "            PI * self.r * self.r"
        )
    );
    says(&warnings(&r), "ragged");
    let twice = format!("{file}{file}");
    assert_eq!(kind(&run(&twice, &payload)), "ambiguous");
}

#[test]
fn a_first_line_that_lost_its_indentation_is_not_read_as_a_deeper_nesting_step() {
    // SEARCH copied from a viewer: only the `def` line lost its indentation, the
    // body is as in the file. A new nested line must keep the file's 4-column step,
    // not be halved as if SEARCH nested 8 columns per level.
    let file = "class C:\n    def f(self, text):\n        text = g(text)\n        return h(text)\n";
    let r = run(
        file,
        &block(
            "def f(self, text):\n        text = g(text)\n        return h(text)\n",
            "def f(self, text):\n        text = g(text)\n        if not text:\n            return []\n        return h(text)\n",
        ),
    );
    assert_eq!(
        text(&r),
        "class C:\n    def f(self, text):\n        text = g(text)\n        if not text:\n            return []\n        return h(text)\n"
    );
    assert!(!warnings(&r).contains("twice as deep"), "{}", warnings(&r));
}

#[test]
fn a_replace_written_at_the_files_indentation_is_not_shifted_again() {
    // SEARCH copied without its indentation (or its first line's), REPLACE
    // written as the file reads: shifted by SEARCH's offset, the method would
    // land a level deeper, nested into the one before it, reported OK.
    let file = "class Loader:\n    def load(self, path):\n        return self.parse(path)\n\n    def parse(self, data):\n        return data.split()\n";
    let want = file.replace(
        "    def parse(self, data):\n        return data.split()",
        "    def parse(self, data, sep=\",\"):\n        return data.split(sep)",
    );
    let replace = "    def parse(self, data, sep=\",\"):\n        return data.split(sep)\n";
    for search in [
        "def parse(self, data):\n    return data.split()\n",
        "def parse(self, data):\n        return data.split()\n",
    ] {
        let r = run(file, &block(search, replace));
        assert_eq!(text(&r), want, "{search:?}");
    }
    // REPLACE in SEARCH's frame is still shifted with it, a wrapped line too.
    let r = run(
        file,
        &block(
            "return self.parse(path)\n",
            "if path:\n    return self.parse(path)\n",
        ),
    );
    assert_eq!(
        text(&r),
        file.replace(
            "        return self.parse(path)",
            "        if path:\n            return self.parse(path)"
        )
    );
}

#[test]
fn a_line_fragment_found_once_is_replaced_as_text() {
    let file = "const TIMEOUT_MS: u64 = 500;\nconst RETRIES: u32 = 3;\n";
    let r = run(
        file,
        &block("TIMEOUT_MS: u64 = 500\n", "TIMEOUT_MS: u64 = 750\n"),
    );
    assert_eq!(
        text(&r),
        "const TIMEOUT_MS: u64 = 750;\nconst RETRIES: u32 = 3;\n"
    );
    assert_eq!(r.report.operations[0].strategy, Some("substring"));
    says(&warnings(&r), "replaced as text");
    // Several occurrences, or one that cuts a word, are no evidence of the place meant.
    assert_eq!(
        kind(&run("a = f(1)\nb = f(1)\n", &block("f(1)\n", "g(1)\n"))),
        "not_found"
    );
    assert_eq!(
        kind(&run("x = 10\n", &block("x = 1\n", "x = 2\n"))),
        "not_found"
    );
    // A whole line that lost its end in SEARCH (REPLACE repeats that end) is no fragment.
    let sloppy = block("This is a sample text\n", "This is a replaced text.\n");
    assert_eq!(
        kind(&run("This is a sample text.\nMore.\n", &sloppy)),
        "not_found"
    );
    // Nor is one whose last line lost its end while REPLACE rewrote that line
    // whole: the old end would stay after the new one.
    let file = "fn f() {\n    // 10 bytes is enough\n    let mut bytes = [0u8; 10];\n}\n";
    let cut = block(
        "    // 10 bytes is enough\n    let mut bytes = [0u8;\n",
        "    // 16 bytes is enough\n    let mut bytes = [0u8; 16];\n",
    );
    refused(file, &cut, "not_found");
    let cut = block(
        "    return write!(f,\n",
        "    return write!(f, \"space\");\n",
    );
    refused("    return write!(f, \"' '\");\n", &cut, "not_found");
    // Nor one whose first line lost its start while REPLACE rewrote whole,
    // indented lines: the old start would stay before the new line.
    let file = "def f(a, b):\n    result = compute(a, b)\n    return result\n";
    let cut = block(
        "= compute(a, b)\n    return result\n",
        "    value = compute(a, b) * 2\n    return value\n",
    );
    refused(file, &cut, "not_found");
    // An insertion inside a line does not close it, and stays a fragment edit.
    let r = run("x = foo(baz)\n", &block("foo(\n", "foo(bar, \n"));
    assert_eq!(text(&r), "x = foo(bar, baz)\n");
}

#[test]
fn a_fragment_spanning_lines_in_a_crlf_file_stays_crlf() {
    let file = "let a = [1,\r\n  2];\r\n";
    let r = run(file, &block("1,\n  2]\n", "1,\n  2, 3]\n"));
    assert_eq!(text(&r), "let a = [1,\r\n  2, 3];\r\n");
    assert_eq!(r.report.operations[0].strategy, Some("substring"));
}

#[test]
fn a_block_around_an_rst_heading_is_read_the_one_way_whose_search_matches() {
    let file = "Install\n=======\n\nRun the installer.\n\nUsage\n=====\n\nRun it.\n";
    let payload = "<<<<<<< SEARCH\nInstall\n=======\n\nRun the installer.\n=======\nInstallation\n============\n\nRun the installer.\n>>>>>>> REPLACE\n";
    let r = run(file, payload);
    assert_eq!(r.report.outcome, Outcome::Ok, "{}", r.report);
    assert_eq!(
        text(&r),
        "Installation\n============\n\nRun the installer.\n\nUsage\n=====\n\nRun it.\n"
    );
}

#[test]
fn a_conflict_sample_in_a_string_is_content_when_one_reading_matches() {
    let file = "SAMPLE = \"\"\"\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> branch\n\"\"\"\n";
    let payload =
        "<<<<<<< SEARCH\nours\n=======\ntheirs\n=======\nmine\n=======\nyours\n>>>>>>> REPLACE\n";
    let r = run(file, payload);
    assert_eq!(
        text(&r),
        "SAMPLE = \"\"\"\n<<<<<<< HEAD\nmine\n=======\nyours\n>>>>>>> branch\n\"\"\"\n"
    );
    // No reading whose SEARCH matches: an honest failure that says how to write it.
    let none = "<<<<<<< SEARCH\nnope\n=======\nx\n=======\ny\n>>>>>>> REPLACE\n";
    let r = run(file, none);
    assert_eq!(kind(&r), "malformed");
    assert!(r.report.error.unwrap().hint.unwrap().contains("9 `<`"));
    // A file with no such lines of its own: a doubled divider is a mistake, not content.
    let doubled = "<<<<<<< SEARCH\ncontent\n=======\n=======\n>>>>>>> REPLACE\n";
    let r = run("content\n", doubled);
    assert_eq!(kind(&r), "malformed");
    assert!(!r.written);
}

#[test]
fn a_doubled_divider_in_a_file_without_such_lines_rejects_the_payload() {
    // A malformed block is `rejected` before any operation runs (EINVAL), not a
    // `failed` operation (EIO): the file decides it only by having no `=======` line.
    let file = "a = 1\nb = 2\n";
    let payload = format!(
        "{}<<<<<<< SEARCH\nb = 2\n=======\n=======\nb = 3\n>>>>>>> REPLACE\n",
        block("a = 1\n", "a = 0\n")
    );
    let r = run(file, &payload);
    assert_eq!(r.report.outcome, Outcome::Rejected);
    assert_eq!(kind(&r), "malformed");
    assert!(
        r.report
            .error
            .as_ref()
            .unwrap()
            .message
            .contains("payload line 6")
    );
    assert!(!r.written);
    // An earlier block that writes such a line makes the second divider possible content.
    let payload = format!(
        "<<<<<<<<< SEARCH\na = 1\n=========\na = 1\n=======\n>>>>>>>>> REPLACE\n{}",
        "<<<<<<< SEARCH\n=======\nb = 2\n=======\nb = 3\n>>>>>>> REPLACE\n"
    );
    let r = run(file, &payload);
    assert_eq!(text(&r), "a = 1\nb = 3\n", "{}", r.report);
}

#[test]
fn an_eliding_search_names_the_lines_it_left_out_and_blames_no_line_that_is_in_the_file() {
    let file = "def f(chunks):\n    \"\"\"f(chunks : [string])\n\n    Correct for sentence endings buried in 'chunks'.\n    When the original text contains a period, munge_whitespace()\n    and split() will convert that to one space too few;\n    this method simply changes the one space to two.\n    \"\"\"\n    i = 0\n    return i\n";
    let payload = block(
        "def f(chunks):\n    ...\n    i = 0\n",
        "def f(chunks):\n    \"\"\"Doc.\"\"\"\n    i = 0\n",
    );
    let hint = refused(file, &payload, "not_found")
        .hint
        .unwrap_or_default();
    says(&hint, "stands for elided code");
    says(&hint, "(file lines 2-8 lie there)");
    assert!(!hint.contains("`i = 0` is not in the file"), "{hint}");
}

#[test]
fn a_mistyped_fragment_of_a_long_line_is_no_replay_because_replace_occurs_elsewhere_in_it() {
    let list: Vec<String> = (0..3000).map(|i| i.to_string()).collect();
    let file = format!("x = [{}]\ny = 2\n", list.join(", "));
    // `12378` is a typo; REPLACE `x` occurs once, at the other end of the same line.
    let r = run(
        &file,
        r#"{"search": "1234, 1235, 1236, 12378", "replace": "x"}"#,
    );
    assert_eq!(r.report.outcome, Outcome::Failed, "{}", warnings(&r));
    assert!(!r.written);
    // A real replay inside a long line is still one.
    let done = file.replace("1236, 1237,", "1236, 99, 1237,");
    let r = run(
        &done,
        r#"{"search": "1236, 1237,", "replace": "1236, 99, 1237,"}"#,
    );
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    says(&warnings(&r), "already applied");
}

#[test]
fn a_patch_whose_context_lines_lost_their_leading_space_keeps_its_added_lines_on_the_files_indentation()
 {
    let file =
        "def f(pat):\n    match = compile(pat)\n    result = bool(match)\n    return result\n";
    // The context lines carry the file's 4 columns with no diff prefix; the `+`
    // line has its prefix and 4 columns.
    let patch = "*** Begin Patch\n*** Update File: f.txt\n@@ def f(pat):\n    result = bool(match)\n+    assert result is not None\n    return result\n*** End Patch\n";
    let r = run(file, patch);
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    assert_eq!(
        text(&r),
        "def f(pat):\n    match = compile(pat)\n    result = bool(match)\n    assert result is not None\n    return result\n"
    );
    // A block that lost a whole level still gets its new lines shifted with it.
    let block = block(
        "result = bool(match)\nreturn result\n",
        "result = bool(match)\nif result:\n    return result\n",
    );
    let r = run(file, &block);
    assert_eq!(
        text(&r),
        "def f(pat):\n    match = compile(pat)\n    result = bool(match)\n    if result:\n        return result\n"
    );
}

/// The columns of `text`'s lines that hold `needle`.
fn column_of(text: &str, needle: &str) -> usize {
    let line = text.lines().find(|l| l.contains(needle)).unwrap();
    line.len() - line.trim_start().len()
}

#[test]
fn a_search_shifted_off_the_files_grid_keeps_replaces_nesting() {
    // Body at 4 or 8 columns; SEARCH sent 2 or 6 columns off it (and at 2 or
    // 6 outright); REPLACE nests a new line under a new `if`, one step of 2 or
    // 4 deeper, as agents write it. Every REPLACE line takes the same shift, so
    // the new body stays under its `if`, and the old line returns to the body.
    for body in [4usize, 8] {
        let pad = " ".repeat(body);
        let file = format!("class A:\n    def greet(name):\n{pad}print(\"Hello, \" + name)\n");
        let file = if body == 4 {
            file.replacen("class A:\n    def", "def", 1)
        } else {
            file
        };
        for sent in [2usize, 6, body - 2, body + 2] {
            if sent == body {
                continue;
            }
            for step in [2usize, 4] {
                let s = " ".repeat(sent);
                let n = " ".repeat(sent + step);
                let r = run(
                    &file,
                    &block(
                        &format!("{s}print(\"Hello, \" + name)\n"),
                        &format!(
                            "{s}if not name:\n{n}name = \"world\"\n{s}print(\"Hello, \" + name)\n"
                        ),
                    ),
                );
                let case = format!("body {body}, sent {sent}, step {step}");
                assert_eq!(
                    r.report.outcome,
                    Outcome::Ok,
                    "{case}: {:?}",
                    r.report.error
                );
                let out = text(&r);
                assert_eq!(column_of(out, "if not name"), body, "{case}:\n{out}");
                assert_eq!(column_of(out, "print("), body, "{case}:\n{out}");
                assert_eq!(
                    column_of(out, "name = "),
                    body + step,
                    "{case}: the new line left its `if`:\n{out}"
                );
            }
        }
    }
}

#[test]
fn a_search_copied_with_the_files_byte_order_mark_matches_and_the_file_keeps_one_mark() {
    let file = "\u{feff}def g():\n    return 1\n";
    let r = run(
        file,
        &block(
            "\u{feff}def g():\n    return 1\n",
            "\u{feff}def g():\n    return 2\n",
        ),
    );
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    assert_eq!(text(&r), "\u{feff}def g():\n    return 2\n");
    assert!(r.report.notes.iter().any(|n| n.contains("byte order mark")));
    // On a file without a mark, a SEARCH with one does not match.
    let r = run("def g():\n", &block("\u{feff}def g():\n", "def h():\n"));
    assert_eq!(r.report.outcome, Outcome::Failed);
}

#[test]
fn a_begin_patch_hunk_marked_end_of_file_takes_the_last_of_several_matches() {
    let file = "def a():\n    pass\n\ndef b():\n    pass\n";
    let patch = "*** Begin Patch\n*** Update File: f.txt\n@@\n     pass\n+\n+# end\n*** End of File\n*** End Patch\n";
    let r = run(file, patch);
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    assert_eq!(text(&r), format!("{file}\n# end\n"));
    assert_eq!(r.report.operations[0].lines, Some([5, 5]));
}

#[test]
fn line_numbers_with_the_arrow_of_claude_codes_reader_are_stripped_when_they_agree() {
    let file = "import os\n\ndef f(name):\n    return name\n";
    let payload = block(
        "     3→def f(name):\n     4→    return name\n",
        "     3→def f(name):\n     4→    return name.lower()\n",
    );
    let r = run(file, &payload);
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    assert_eq!(
        text(&r),
        "import os\n\ndef f(name):\n    return name.lower()\n"
    );
    assert_eq!(r.report.operations[0].strategy, Some("line_numbers"));
}

#[test]
fn numbered_replace_lines_lose_their_prefix_though_lines_were_deleted_or_added() {
    let file = "fn f() {\n    let a = 1;\n    let b = 2;\n    let c = 3;\n}\n";
    let payload = serde_json::json!({
        "old_string": "     2\u{2192}    let a = 1;\n     3\u{2192}    let b = 2;\n     4\u{2192}    let c = 3;",
        "new_string": "     2\u{2192}    let a = 1;\n     4\u{2192}    let c = 3;",
    });
    let r = run(file, &payload.to_string());
    assert_eq!(r.report.outcome, Outcome::Ok, "{}", r.report);
    assert_eq!(text(&r), "fn f() {\n    let a = 1;\n    let c = 3;\n}\n");
    let payload = block(
        "2:    let a = 1;\n3:    let b = 2;\n",
        "2:    let a = 1;\n    let x = 0;\n3:    let b = 2;\n",
    );
    let r = run(file, &payload);
    assert_eq!(r.report.operations[0].strategy, Some("line_numbers"));
    assert_eq!(
        text(&r),
        "fn f() {\n    let a = 1;\n    let x = 0;\n    let b = 2;\n    let c = 3;\n}\n"
    );
    assert!(!warnings(&r).contains("column"), "{}", warnings(&r));
}

#[test]
fn search_and_replace_that_differ_only_in_what_a_tolerant_match_set_aside_warn_as_identical() {
    let file = "def f():\n\tx = 1\n\treturn x\n";
    for (search, replace) in [
        ("\tx = 1   \n", "\tx = 1\n"),
        ("    x = 1\n    return x\n", "\tx = 1\n\treturn x\n"),
    ] {
        let r = run(file, &block(search, replace));
        assert_eq!(r.report.outcome, Outcome::Ok, "{search:?}");
        assert_eq!(text(&r), file);
        assert_eq!(
            r.report.operations[0].outcome,
            OpOutcome::Unchanged,
            "{search:?}: {}",
            warnings(&r)
        );
        says(&warnings(&r), "nothing to change");
    }
}

#[test]
fn a_utf8_search_on_a_latin1_file_names_the_line_and_byte_and_the_encoding() {
    let file: &[u8] = b"x = 1\nname = 'caf\xe9'\ny = 2\n";
    let edit = apply(
        "f",
        Some(file),
        block("name = 'café'\n", "name = 'tea'\n").as_bytes(),
        &Options::default(),
    );
    assert!(edit.content.is_none());
    let error = edit.report.error.unwrap();
    assert_eq!(error.kind, "not_text");
    let said = format!("{} {}", error.message, error.hint.unwrap_or_default());
    for part in ["line 2", "0xE9", "`é`", "Latin-1"] {
        assert!(said.contains(part), "{part} missing in: {said}");
    }
}

#[test]
fn the_text_editor_insert_command_puts_new_str_after_insert_line_once() {
    let insert = |line: i64, text: &str| {
        serde_json::json!({"command": "insert", "path": "f.txt", "insert_line": line, "new_str": text})
            .to_string()
    };
    let r = run("a\r\nb\r\nc", &insert(0, "top\n"));
    assert_eq!(text(&r), "top\r\na\r\nb\r\nc");
    let r = run("a\nb\nc", &insert(3, "d\ne"));
    assert_eq!(text(&r), "a\nb\nc\nd\ne");
    let r = run("a\nb\n", &insert(1, "x\n"));
    assert_eq!(text(&r), "a\nx\nb\n");
    assert_eq!(r.report.operations[0].strategy, Some("insert"));
    assert_eq!(r.report.operations[0].lines, Some([2, 2]));
    assert!(r.report.notes.is_empty(), "{:?}", r.report.notes);
    let again = run(text(&r), &insert(1, "x\n"));
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
    assert!(!again.written);
    assert_eq!(text(&run("a\n\nb\n", &insert(1, "\n"))), "a\n\n\nb\n");
    let r = run("a\n", &insert(5, "x\n"));
    assert_eq!((r.report.outcome, kind(&r)), (Outcome::Failed, "not_found"));
    assert!(r.report.error.unwrap().message.contains("past the end"));
    let r = run_with(None, &insert(0, "x\n"), &Options::default());
    assert_eq!((r.report.outcome, r.written), (Outcome::Failed, false));
}

#[test]
fn replace_lines_copied_with_a_readers_line_numbers_fail_instead_of_writing_them() {
    // SEARCH copied from the file, REPLACE from `cat -n`: written as sent, the
    // numbers would land in the code and the edit be reported as a success.
    let file = "def f(text):\n    import textwrap\n    return textwrap.wrap(text)\n";
    let payload = block(
        "    import textwrap\n    return textwrap.wrap(text)\n",
        "     2\t    import textwrap\n     3\t    return textwrap.wrap(text, 70)\n",
    );
    let error = refused(file, &payload, "number_prefix");
    says(&error.message, "REPLACE");
    // Prefixed on both sides, they are stripped from both (the line_numbers tier).
    let both = block(
        "2:    import textwrap\n3:    return textwrap.wrap(text)\n",
        "2:    import textwrap\n3:    return textwrap.wrap(text, 70)\n",
    );
    let r = run(file, &both);
    assert_eq!(
        text(&r),
        "def f(text):\n    import textwrap\n    return textwrap.wrap(text, 70)\n"
    );
    // One numbered line is no sign of a copy: a YAML key may read `8080: port`.
    let r = run(
        "ports:\n  port\n",
        r#"{"old_str": "port\n", "new_str": "8080: port\n"}"#,
    );
    assert_eq!(text(&r), "ports:\n  8080: port\n", "{}", r.report);
    // A file whose lines do start with numbers has them in SEARCH: nothing is refused.
    let table = "1\tapple\n2\tpear\n";
    let r = run(table, &block("1\tapple\n", "1\tapple\n2\tplum\n"));
    assert_eq!(r.report.outcome, Outcome::Ok, "{}", r.report);
}

#[test]
fn replace_lines_added_with_a_diffs_plus_still_on_them_fail_instead_of_writing_it() {
    let file = "def f(text):\n    text = munge(text)\n    return split(text)\n";
    let payload = block(
        "    text = munge(text)\n    return split(text)\n",
        "    text = munge(text)\n+    text = text.strip()\n    return split(text)\n",
    );
    let error = refused(file, &payload, "diff_prefix");
    says(&error.message, "REPLACE line 2");
    // A line that really starts with `+` (a continuation, a diff kept in a file) is written.
    let kept = run(
        "s = (a\n+ b)\n",
        &block("s = (a\n+ b)\n", "s = (a\n+ b\n+ c)\n"),
    );
    assert_eq!(text(&kept), "s = (a\n+ b\n+ c)\n");
    let prose = run("x\n", &block("x\n", "x\n+ more\n"));
    assert_eq!(text(&prose), "x\n+ more\n");
}

#[test]
fn a_markdown_fence_line_that_slipped_into_replace_fails_instead_of_writing_it() {
    let file = "def size(p):\n    return os.path.getsize(p)\n";
    // The closing fence of the wrapper, written before the REPLACE marker.
    let closing = "```python\n<<<<<<< SEARCH\ndef size(p):\n    return os.path.getsize(p)\n=======\ndef size(p):\n    return os.path.getsize(p) or 0\n```\n>>>>>>> REPLACE\n";
    let error = refused(file, closing, "malformed");
    says(&error.message, "REPLACE line 3");
    says(&error.message, "fence");
    let hint = error.hint.unwrap_or_default();
    says(&hint, "fence");
    // An opening fence right after the divider.
    let opening = "<<<<<<< SEARCH\ndef size(p):\n    return os.path.getsize(p)\n=======\n```python\ndef size(p):\n    return os.path.getsize(p) or 0\n>>>>>>> REPLACE\n";
    let error = refused(file, opening, "malformed");
    says(&error.message, "REPLACE line 1");
}

#[test]
fn fence_lines_of_a_markdown_edit_are_written() {
    // A whole fenced block added to a Markdown file.
    let file = "# Build\n\nRun make.\n";
    let r = run(
        file,
        &block("Run make.\n", "Run make:\n\n```sh\nmake\n```\n"),
    );
    assert_eq!(
        text(&r),
        "# Build\n\nRun make:\n\n```sh\nmake\n```\n",
        "{}",
        r.report
    );
    // A fence line SEARCH also has is the file's own.
    let file = "```sh\nmake\n```\n\nDone.\n";
    let r = run(file, &block("make\n```\n", "make install\n```\n"));
    assert_eq!(
        text(&r),
        "```sh\nmake install\n```\n\nDone.\n",
        "{}",
        r.report
    );
    // An opening fence re-tagged: REPLACE opens no more blocks than SEARCH did.
    let r = run(file, &block("```sh\nmake\n", "```bash\nmake\n"));
    assert_eq!(text(&r), "```bash\nmake\n```\n\nDone.\n", "{}", r.report);
    // Closing a block the file left open, its opening line in SEARCH.
    let r = run(
        "```sh\nmake\n",
        &block("```sh\nmake\n", "```sh\nmake\n```\n"),
    );
    assert_eq!(text(&r), "```sh\nmake\n```\n", "{}", r.report);
    // A whole block re-tagged: balanced in REPLACE.
    let r = run(file, &block("```sh\nmake\n```\n", "```bash\nmake\n```\n"));
    assert_eq!(text(&r), "```bash\nmake\n```\n\nDone.\n", "{}", r.report);
}

#[test]
fn tab_indented_new_lines_in_a_file_indented_only_with_spaces_are_warned_about() {
    let file = "class A:\n    def f(self, text):\n        return split(text)\n";
    let replace =
        "    def f(self, text):\n\tif not text:\n\t\treturn []\n        return split(text)\n";
    let r = run(
        file,
        &block(
            "    def f(self, text):\n        return split(text)\n",
            replace,
        ),
    );
    assert_eq!(r.report.outcome, Outcome::Ok);
    assert!(text(&r).contains("\n\tif not text:\n"), "written as sent");
    says(&warnings(&r), "REPLACE lines 2, 3");
    says(&warnings(&r), "only with spaces");
    let makefile = "all:\n\tcc a.c\n";
    let r = run(
        makefile,
        &block("all:\n\tcc a.c\n", "all:\n\tcc a.c\n\tcc b.c\n"),
    );
    assert_eq!(text(&r), "all:\n\tcc a.c\n\tcc b.c\n");
    assert_eq!(warnings(&r), "");
}

#[test]
fn a_search_whose_newlines_were_escaped_twice_is_told_so() {
    let file = "def f(self):\n    x = 1\n";
    let payload =
        r#"{"old_str": "def f(self):\\n    x = 1", "new_str": "def f(self):\\n    x = 2"}"#;
    let r = run(file, payload);
    assert_eq!(kind(&r), "not_found");
    let hint = r.report.error.unwrap().hint.unwrap_or_default();
    says(&hint, "escaped twice");
    let literal = run(
        "s = 'a\\nb'\n",
        r#"{"old_str": "'a\\nb'", "new_str": "'c'"}"#,
    );
    assert_eq!(text(&literal), "s = 'c'\n");
}

/// A `*** Begin Patch` hunk lies below its `@@` line: a copy of its lines above
/// that line is never edited, whether the hunk was sent already or is stale.
#[test]
fn a_patch_hunk_lies_below_its_at_at_line() {
    let file = "impl A {\n    fn run(&self) {\n        go();\n    }\n}\n\nimpl B {\n    fn run(&self) {\n        go();\n    }\n}\n";
    let patch = "*** Begin Patch\n*** Update File: f.txt\n@@ impl B {\n     fn run(&self) {\n-        go();\n+        go_fast();\n*** End Patch\n";
    let first = run(file, patch);
    assert_eq!(
        first.report.outcome,
        Outcome::Ok,
        "{:?}",
        first.report.error
    );
    let edited = text(&first).to_owned();
    let want = "impl A {\n    fn run(&self) {\n        go();\n    }\n}\n\nimpl B {\n    fn run(&self) {\n        go_fast();\n    }\n}\n";
    assert_eq!(edited, want, "impl B is edited, impl A is not");
    let again = run(&edited, patch);
    assert_eq!(
        again.report.outcome,
        Outcome::Ok,
        "{:?}",
        again.report.error
    );
    assert!(
        !again.written,
        "sent again, it is a replay: {}",
        text(&again)
    );
    says(&warnings(&again), "already applied");
    let stale = file.replace(
        "impl B {\n    fn run(&self) {\n        go();",
        "impl B {\n    fn run(&self) {\n        stop();",
    );
    let error = refused(&stale, patch, "not_found");
    says(&error.message, "above it, at line(s) 2");
}

/// A hunk or a `:start_line:` block sent again, in a file with another copy of
/// its lines, never edits that copy: REPLACE already stands at its line. A hunk
/// whose numbers merely drifted still applies where its lines are.
#[test]
fn a_line_hint_where_replace_already_stands_never_sends_the_edit_to_another_copy() {
    let file = "fn a() {\n    call(1);\n}\n\nfn b() {\n    call(1);\n}\n";
    let hunk = "--- a/f.txt\n+++ b/f.txt\n@@ -6 +6 @@\n-    call(1);\n+    call(2);\n";
    let first = run(file, hunk);
    assert_eq!(
        first.report.outcome,
        Outcome::Ok,
        "{:?}",
        first.report.error
    );
    let edited = text(&first).to_owned();
    assert_eq!(
        edited,
        file.replace("b() {\n    call(1)", "b() {\n    call(2)")
    );
    let error = refused(&edited, hunk, "ambiguous");
    says(
        &error.message,
        "at line 6, nearer it, already reads as REPLACE",
    );
    let hinted = "<<<<<<< SEARCH\n:start_line:6\n-------\n    call(1);\n=======\n    call(2);\n>>>>>>> REPLACE\n";
    refused(&edited, hinted, "ambiguous");
    let drifted = "--- a/f.txt\n+++ b/f.txt\n@@ -9 +9 @@\n-    call(1);\n+    call(3);\n";
    let r = run(&edited, drifted);
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    says(text(&r), "a() {\n    call(3)");
}

/// A `:start_line:` block sent again in a file with two more copies of its
/// lines, equally far from its line, says the edit stands at that line, not
/// that a line hint it already has would pick one.
#[test]
fn a_placed_block_sent_again_between_two_copies_says_it_stands_there() {
    let file = "fn a() {\n    call(1);\n}\nfn b() {\n    call(1);\n}\nfn c() {\n    call(1);\n}\n";
    let placed = "<<<<<<< SEARCH\n:start_line:5\n-------\n    call(1);\n=======\n    call(2);\n>>>>>>> REPLACE\n";
    let first = run(file, placed);
    let done = text(&first).to_owned();
    assert_eq!(
        done,
        file.replacen("call(1)", "call(2)", 2)
            .replacen("call(2)", "call(1)", 1)
    );
    let error = refused(&done, placed, "ambiguous");
    assert!(
        error
            .message
            .contains("SEARCH occurs 2 times (lines 2, 8), away from line 5")
            && error
                .message
                .contains("at line 5, nearer it, already reads as REPLACE"),
        "{}",
        error.message
    );
    let hint = error.hint.unwrap();
    says(&hint, "to change one of lines 2, 8, send it placed there");
}

/// A SEARCH sent with all its lines at one column, where the file nests them,
/// matches with each line's indentation set aside; a REPLACE written the same
/// way cannot say where a new line between two differently nested lines goes
/// (an `elif` guessed into the block above it is another program), so it
/// fails. A new line between lines of one depth, or a SEARCH that kept its
/// nesting but for a line, still applies.
#[test]
fn a_flat_search_adding_lines_where_the_nesting_changes_fails() {
    let file = "def f(x, y):\n    if x:\n        return 1\n    else:\n        return 2\n";
    let flat = block(
        "if x:\nreturn 1\nelse:\nreturn 2\n",
        "if x:\nreturn 1\nelif y:\nreturn 3\nelse:\nreturn 2\n",
    );
    let error = refused(file, &flat, "not_found");
    assert!(
        error.message.contains("came at one column") && error.message.contains("REPLACE line 3"),
        "{}",
        error.message
    );
    let file = "def g():\n    a = 1\n    b = 2\n    if a:\n        c()\n";
    let between = block("a = 1\nb = 2\nif a:\n", "a = 1\na2 = 0\nb = 2\nif a:\n");
    assert_eq!(
        text(&run(file, &between)),
        "def g():\n    a = 1\n    a2 = 0\n    b = 2\n    if a:\n        c()\n"
    );
    let file = "def h():\n    if a:\n        b()\n        d()\n    c()\n";
    let one_off = block(
        "    if a:\n    b()\n        d()\n    c()\n",
        "    if a:\n    b()\n    b2()\n        d()\n    c()\n",
    );
    assert_eq!(
        text(&run(file, &one_off)),
        "def h():\n    if a:\n        b()\n        b2()\n        d()\n    c()\n"
    );
}

/// A SEARCH that stops short of the lines REPLACE rewrites would leave those
/// lines in the file twice: refused, saying which lines SEARCH should reach.
#[test]
fn a_replace_that_ends_with_the_lines_after_search_is_refused() {
    let file = "fn f() {\n    a();\n    b();\n    c();\n}\n";
    let short = block(
        "fn f() {\n    a();\n",
        "fn f() {\n    a2();\n    b();\n    c();\n}\n",
    );
    let error = refused(file, &short, "duplicates");
    says(&error.message, "(lines 3-5)");
    assert!(error.hint.unwrap().contains("through line 5"));
    // SEARCH reaching those lines replaces them.
    let whole = block(
        "fn f() {\n    a();\n    b();\n    c();\n}\n",
        "fn f() {\n    a2();\n    b();\n    c();\n}\n",
    );
    assert_eq!(
        text(&run(file, &whole)),
        "fn f() {\n    a2();\n    b();\n    c();\n}\n"
    );
    // Closing lines alike, or lines SEARCH ends with too, are no sign of it.
    let nested = "mod m {\n    fn g() {\n    }\n}\n}\n}\n";
    let r = run(
        nested,
        &block("    fn g() {\n", "    fn g() {\n        x();\n    }\n}\n"),
    );
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    // The mirror: a SEARCH that starts late, REPLACE repeating the lines before it.
    let file = "def handler(event):\n    data = parse(event)\n    validate(data)\n    result = process(data)\n    return result\n";
    let late = block(
        "    result = process(data)\n    return result\n",
        "    data = parse(event)\n    validate(data)\n    log.info(data)\n    result = process(data)\n    return result\n",
    );
    let error = refused(file, &late, "duplicates");
    says(&error.message, "precede SEARCH in the file (lines 2-3)");
    // Lines the file repeats elsewhere (a table's rows) are no sign of it: a
    // table grown by a row repeats them.
    let table = "v = [\n  0,\n  0,\n  0,\n  0,\n  9,\n]\n";
    let r = run(table, &block("  0,\n  9,\n", "  0,\n  0,\n  1,\n"));
    assert_eq!(text(&r), "v = [\n  0,\n  0,\n  0,\n  0,\n  0,\n  1,\n]\n");
    let kept = "a();\nb();\nc();\nb();\nc();\n";
    let r = run(kept, &block("a();\nb();\nc();\n", "z();\nb();\nc();\n"));
    assert_eq!(text(&r), "z();\nb();\nc();\nb();\nc();\n");
}

/// A REPLACE that ends with the closing brace SEARCH stopped short of would
/// leave it in the file twice: one line of brackets alone is in every file, so
/// it tells only when the file's brackets pair and would no longer once applied.
#[test]
fn a_replace_that_ends_with_the_brace_after_search_is_refused() {
    let file = "fn main() {\n    let a = 1;\n    run(a);\n}\n\nfn run(a: i32) {\n    println!(\"{a}\");\n}\n";
    let short = block(
        "fn main() {\n    let a = 1;\n    run(a);\n",
        "fn main() {\n    let a = 2;\n    run(a);\n}\n",
    );
    let error = refused(file, &short, "duplicates");
    assert!(
        error.message.contains("(line 4)") && error.message.contains("no longer pair"),
        "{}",
        error.message
    );
    assert!(error.hint.unwrap().contains("through line 4"));
    // Two closing lines, neither standing once in the file.
    let nested =
        "impl A {\n    fn f(&self) {\n        g();\n    }\n}\n\nimpl B {\n    fn h(&self) {}\n}\n";
    let short = block(
        "    fn f(&self) {\n        g();\n",
        "    fn f(&self) {\n        g2();\n    }\n}\n",
    );
    let error = refused(nested, &short, "duplicates");
    says(&error.message, "(lines 4-5)");
    // A REPLACE whose closing line SEARCH holds too, or that opens what it
    // closes, pairs: applied as sent.
    let whole = block("    run(a);\n}\n", "    run(a);\n    done();\n}\n");
    assert!(text(&run(file, &whole)).contains("    done();\n}\n\nfn run"));
    let wrapped = block("    run(a);\n", "    if a > 0 {\n        run(a);\n    }\n");
    assert!(text(&run(file, &wrapped)).contains("        run(a);\n    }\n}\n"));
}

/// A regex operation sent again never inserts twice: a match whose replacement
/// already stands around it is left as it is (replay rule b), the others are
/// replaced, and the report says so.
#[test]
fn a_regex_insertion_sent_again_is_already_applied() {
    let payload =
        r#"{"regex": true, "all": true, "search": "return 1;", "replace": "return 1; // one"}"#;
    let file = "fn f() {\n    return 1;\n}\nfn g() {\n    return 1;\n}\n";
    let first = run(file, payload);
    let done = text(&first).to_owned();
    assert_eq!(done, file.replace("return 1;", "return 1; // one"));
    let again = run(&done, payload);
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
    assert!(!again.written, "{}", text(&again));
    let half = done.replacen("return 1; // one", "return 1;", 1);
    let r = run(&half, payload);
    assert_eq!(text(&r), done);
    says(&warnings(&r), "1 of the 2 matches already read as REPLACE");
}

/// A REPLACE found inside SEARCH's closest region, which still holds a line
/// REPLACE drops, is no replay, and the report shows that region itself, not
/// the best one beside it.
#[test]
fn a_failed_replay_reports_searchs_closest_region_even_where_replace_stands() {
    let file = "fn main() {\n    setup_logging();\n    let cfg = load_config(\"app.toml\");\n    run(cfg);\n}\n";
    let payload = block(
        "    setup_logging();\n    let cfg = load_config(\"app.yaml\");\n",
        "    let cfg = load_config(\"app.toml\");\n",
    );
    let error = refused(file, &payload, "not_found");
    let closest = error.closest.expect("a closest region");
    assert_eq!(
        (closest.start_line, closest.end_line),
        (2, 3),
        "{}",
        error.hint.unwrap_or_default()
    );
}

/// An operation on every place (`all`) sent again is a replay: each place of
/// REPLACE is where SEARCH was, and the others are no rival region.
#[test]
fn an_operation_on_every_place_sent_again_is_already_applied() {
    let payload = r#"{"search": "(x[0])", "replace": "(x[0].clone())", "all": true}"#;
    let first = run("a(x[0]);\nb(x[0]);\n", payload);
    assert_eq!(text(&first), "a(x[0].clone());\nb(x[0].clone());\n");
    let again = run(text(&first), payload);
    assert_eq!(
        again.report.outcome,
        Outcome::Ok,
        "{:?}",
        again.report.error
    );
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
    assert!(!again.written);
}

/// A `*** Begin Patch` hunk sent again, whose lines are now only in a later
/// copy below its `@@` line, never edits that copy: REPLACE stands at the
/// `@@` line's block already.
#[test]
fn a_patch_hunk_sent_again_never_edits_the_next_copy_below_its_at_at_line() {
    let file = "class A:\n    def run(self):\n        self.start()\n        return 1\n\n\nclass B:\n    def run(self):\n        self.start()\n        return 1\n";
    let patch = "*** Begin Patch\n*** Update File: f.txt\n@@ class A:\n         self.start()\n-        return 1\n+        return 2\n*** End Patch\n";
    let first = run(file, patch);
    assert_eq!(text(&first), file.replacen("return 1", "return 2", 1));
    let error = refused(text(&first), patch, "ambiguous");
    says(&error.message, "the file at line 3, nearer it");
}

/// A `:start_line:` pointing into lines an earlier block replaced is taken
/// where those lines now begin; a SEARCH found only outside what that block
/// made of them is another copy, and the operation fails naming the block.
#[test]
fn a_start_line_into_lines_an_earlier_block_replaced_never_edits_another_copy() {
    let file = "services:\n  - name: api\n    image: app:1.0\n    replicas: 2\n  - name: worker\n    image: app:1.0\n    replicas: 2\n";
    let first = block(
        "  - name: api\n    image: app:1.0\n",
        "  - name: api\n    image: app:2.0\n",
    );
    let second = "<<<<<<< SEARCH\n:start_line:3\n-------\n    image: app:1.0\n    replicas: 2\n=======\n    image: app:1.0\n    replicas: 4\n>>>>>>> REPLACE\n";
    let error = refused(file, &format!("{first}{second}"), "not_found");
    says(&error.message, "operation 1 replaced");
    assert!(error.hint.unwrap_or_default().contains("operation #1"));
    // Within what the earlier block made of them, the line is still there.
    let r = run(
        "a\nb\nc\nd\n",
        &format!(
            "{}<<<<<<< SEARCH\n:start_line:3\n-------\nc\n=======\nC\n>>>>>>> REPLACE\n",
            block("b\nc\n", "B\nc\n")
        ),
    );
    assert_eq!(text(&r), "a\nB\nC\nd\n");
}

/// A REPLACE whose line breaks were escaped twice, where SEARCH's were not, is
/// refused: written as sent, the new lines would be one line of code.
#[test]
fn a_replace_whose_newlines_were_escaped_twice_is_refused() {
    let file = "def f():\n    a = 1\n    return a\n";
    let payload =
        r#"{"old_str": "    a = 1\n    return a", "new_str": "    a = 2\\n    return a * 2"}"#;
    let error = refused(file, payload, "malformed");
    says(&error.message, "escaped twice");
    // A `\n` in a string literal is code.
    let payload = r#"{"old_str": "    a = 1\n    return a", "new_str": "    a = \"\\n\".join(x)\n    return a"}"#;
    let r = run(file, payload);
    assert_eq!(
        text(&r),
        "def f():\n    a = \"\\n\".join(x)\n    return a\n"
    );
}

/// A REPLACE escaped for HTML on its way (as an XML tool call's value may be),
/// while SEARCH was copied as the file reads, is refused: written as sent,
/// `&lt;` would stand in the code.
#[test]
fn a_replace_escaped_for_html_is_refused() {
    let file = "def f(a, b):\n    if a < b and b > 0:\n        return a\n    return b\n";
    for payload in [
        block(
            "    if a < b and b > 0:\n",
            "    if a &lt;= b and b &gt; 0:\n",
        ),
        "<search_and_replace><path>f.txt</path><search>    if a < b and b > 0:</search><replace>    if a &lt;= b and b &gt; 0:</replace></search_and_replace>".to_owned(),
    ] {
        let error = refused(file, &payload, "malformed");
        assert!(error.message.contains("`&lt;`"), "{}", error.message);
    }
    // Code that escapes HTML holds the characters too, and is written.
    let r = run(
        file,
        &block(
            "    return b\n",
            "    return b.replace(\"&\", \"&amp;\").replace(\"<\", \"&lt;\")\n",
        ),
    );
    assert_eq!(r.report.outcome, Outcome::Ok);
    // In markup, an entity is text an edit may mean.
    let page = "<p>Tom & Jerry</p>\n";
    let payload = block("<p>Tom & Jerry</p>\n", "<p>Tom &amp; Jerry</p>\n");
    let edit = apply(
        "page.html",
        Some(page.as_bytes()),
        payload.as_bytes(),
        &Options::default(),
    );
    assert_eq!(
        edit.content.as_deref(),
        Some(&b"<p>Tom &amp; Jerry</p>\n"[..])
    );
}

/// An exact match writes REPLACE as sent, so new lines indented the other way
/// from the whole file (tabs into spaces, spaces into tabs) are written, with a
/// warning naming them.
#[test]
fn new_lines_indented_unlike_the_whole_file_are_named() {
    let make = "all:\n\tcc -o app app.c\n";
    let r = run(
        make,
        &block("\tcc -o app app.c\n", "\tcc -o app app.c\n    strip app\n"),
    );
    says(&warnings(&r), "REPLACE lines 2 are indented with spaces");
    let py = "def f():\n    return 1\n";
    let r = run(py, &block("    return 1\n", "\tx = 2\n    return 1\n"));
    says(&warnings(&r), "REPLACE lines 1 are indented with tabs");
    let r = run(
        make,
        &block("\tcc -o app app.c\n", "\tcc -o app app.c\n\tstrip app\n"),
    );
    assert!(warnings(&r).is_empty(), "{}", warnings(&r));
}

/// `@@` lines in a row nest (`@@ class B:` then `@@     def run(self):`): the
/// hunk lies below the inner one's line, found below the outer one's.
#[test]
fn nested_at_at_lines_place_a_hunk_in_the_inner_block_of_the_outer_one() {
    let file = "class A:\n    def run(self):\n        self.start()\n        return 1\n\n\nclass B:\n    def run(self):\n        self.start()\n        return 1\n";
    let patch = "*** Begin Patch\n*** Update File: f.txt\n@@ class B:\n@@     def run(self):\n         self.start()\n-        return 1\n+        return 2\n*** End Patch\n";
    let r = run(file, patch);
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    let want = "class A:\n    def run(self):\n        self.start()\n        return 1\n\n\nclass B:\n    def run(self):\n        self.start()\n        return 2\n";
    assert_eq!(text(&r), want);
    let again = run(want, patch);
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
}

/// In a prose file (Markdown and the like) a fence line is content: an edit
/// may add a changelog entry's block, close a block the file left open, or
/// stop inside one (a later hunk closes it).
#[test]
fn fence_lines_in_a_prose_file_are_content() {
    let md = |file: &str, payload: &str| {
        let edit = apply(
            "CHANGELOG.md",
            Some(file.as_bytes()),
            payload.as_bytes(),
            &Options::default(),
        );
        assert_eq!(edit.report.outcome, Outcome::Ok, "{}", edit.report);
        String::from_utf8(edit.content.unwrap()).unwrap()
    };
    let closes = md(
        "```rust\nfn main() {}\n\nNext para.\n",
        &block(
            "fn main() {}\n\nNext para.\n",
            "fn main() {}\n```\n\nNext para.\n",
        ),
    );
    assert_eq!(closes, "```rust\nfn main() {}\n```\n\nNext para.\n");
    let entry = md(
        "### Removed\n\n## 0.1.0\n",
        &block(
            "## 0.1.0\n",
            "- Removed `Eq`:\n  ```\n  if x {}\n  ``` (#2642)\n## 0.1.0\n",
        ),
    );
    says(&entry, "``` (#2642)");
}

/// Lines that read like placeholders but are documentation, example code or
/// the next line of a sentence are written, as real changes write them; the
/// placeholder a real comment precedes is still refused.
#[test]
fn doc_comments_examples_and_wrapped_sentences_are_no_placeholders() {
    let doc = "/// Panics under the\n/// same circumstances as [`is_bit_valid`].\nfn f() {}\n";
    let r = run(
        doc,
        &block(
            "/// same circumstances as [`is_bit_valid`].\n",
            "/// same circumstances as [`is_safe`].\n",
        ),
    );
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    // A comment that reads like one, edited, is no code lost.
    let r = run(
        "// x is the\n// same as y.\n",
        &block("// same as y.\n", "// same as z.\n"),
    );
    assert_eq!(text(&r), "// x is the\n// same as z.\n");
    for line in [
        "    /// unchanged in the error case.",
        "/// unaltered.",
        "// SAFETY: Same as with `Send`.",
        "// ###\"...\"### -> ...",
        "//   `.1`, etc)",
    ] {
        let payload = block(
            "fn a() {}\n",
            &format!("fn a() {{}}\n// Some wrapped comment text\n{line}\nfn b() {{}}\n"),
        );
        let r = run("fn a() {}\n", &payload);
        assert_eq!(
            r.report.outcome,
            Outcome::Ok,
            "{line}: {:?}",
            r.report.error
        );
    }
    let example = block(
        "## Usage\n",
        "## Usage\n\n```rust\nfn main() {\n    // ...\n    let x = f();\n}\n```\n",
    );
    let r = run("## Usage\n\nText.\n", &example);
    assert_eq!(r.report.outcome, Outcome::Ok, "{:?}", r.report.error);
    // After a real comment, an ellipsis placeholder is still one.
    let file = "def compute(items):\n    total = 0\n    for i in items:\n        total += i\n    return total\n";
    let dropped = block(
        file,
        "def compute(items):\n    # compute totals\n    # ... existing code ...\n    return total\n",
    );
    refused(file, &dropped, "placeholder");
}

/// An edit sent again, whose exact SEARCH is gone, never applies twice through
/// a tolerant match: not at another copy at another indentation, nor at
/// SEARCH's lines inside the REPLACE it wrote.
#[test]
fn an_edit_sent_again_never_applies_twice_through_a_tolerant_match() {
    let file = "fn a() {\n    x(\n        open(p),\n    )\n}\nfn b() {\n    if c {\n        x(\n            open(p),\n        )\n    }\n}\n";
    let payload = block("            open(p),\n", "            open(p)?,\n");
    let first = run(file, &payload);
    assert_eq!(
        text(&first),
        file.replace("            open(p),", "            open(p)?,")
    );
    let error = refused(text(&first), &payload, "ambiguous");
    says(&error.message, "exactly at line 9");
    let file = "fn f() {\n    loop {\n        park(\n            key,\n        );\n    }\n}\n";
    let payload = block(
        "        park(\n            key,\n        );\n",
        "        while busy() {\n            park(\n                key,\n            );\n        }\n",
    );
    let first = run(file, &payload);
    assert_eq!(
        first.report.outcome,
        Outcome::Ok,
        "{:?}",
        first.report.error
    );
    refused(text(&first), &payload, "ambiguous");
}

/// A line lengthened by an edit (a comment appended) and sent again is
/// already applied: the line now holds SEARCH with REPLACE's text around it.
#[test]
fn a_line_lengthened_by_an_edit_sent_again_is_already_applied() {
    let file = "pub mod ast;\npub mod hir;\npub mod utf8;\n";
    let payload = block("pub mod ast;\n", "pub mod ast; // syntax tree\n");
    let first = run(file, &payload);
    assert_eq!(
        text(&first),
        "pub mod ast; // syntax tree\npub mod hir;\npub mod utf8;\n"
    );
    let again = run(text(&first), &payload);
    assert_eq!(
        again.report.outcome,
        Outcome::Ok,
        "{:?}",
        again.report.error
    );
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
    assert!(!again.written);
}

#[test]
fn replace_standing_beside_a_stale_search_is_no_replay_but_not_found_there() {
    // A copy of REPLACE a few lines above SEARCH's own place, which went stale
    // (`finish(True)`): "already applied" would be a guess.
    let copy = "def first():\n    start()\n    audit()\n    finish()\n\ndef second():\n    start()\n    finish(True)\n";
    let r = run(
        copy,
        &block(
            "    start()\n    finish()\n",
            "    start()\n    audit()\n    finish()\n",
        ),
    );
    assert_eq!((r.report.outcome, r.written), (Outcome::Failed, false));
    let e = r.report.error.unwrap();
    assert_eq!(e.kind, "not_found");
    let closest = e.closest.unwrap();
    assert_eq!((closest.start_line, closest.end_line), (7, 8));
    assert!(e.hint.unwrap().contains("resemble SEARCH nearly as much"));
    // REPLACE at another indentation, SEARCH found there only with tolerance,
    // while SEARCH's own indentation stands stale (`go(fast)`) above it.
    let deeper = "def run(self):\n    if ready:\n        go(fast)\n    for x in xs:\n        if ready:\n            go()\n            log()\n";
    let r = run(
        deeper,
        &block(
            "    if ready:\n        go()\n",
            "    if ready:\n        go()\n        log()\n",
        ),
    );
    assert_eq!((r.report.outcome, r.written), (Outcome::Failed, false));
    let e = r.report.error.unwrap();
    assert_eq!(e.kind, "not_found");
    let closest = e.closest.unwrap();
    assert_eq!((closest.start_line, closest.end_line), (2, 3));
}

#[test]
fn a_replay_with_no_near_copy_of_search_is_still_already_applied() {
    // Applied at another indentation (re-indented), then sent again.
    let file = "class A:\n    def run(self):\n        if ready:\n            go()\n";
    let payload = block("if ready:\n    go()\n", "if ready:\n    go()\n    log()\n");
    let first = run(file, &payload);
    assert_eq!(
        text(&first),
        "class A:\n    def run(self):\n        if ready:\n            go()\n            log()\n"
    );
    let again = run(text(&first), &payload);
    assert_eq!(
        (again.report.operations[0].outcome, again.written),
        (OpOutcome::AlreadyApplied, false)
    );
    // A rewrite sent again, another function standing beside it.
    let payload = block(
        "    start()\n    finish()\n",
        "    start()\n    audit()\n    finish()\n",
    );
    let file = "def first():\n    start()\n    finish()\n\ndef other():\n    return 1\n";
    let first = run(file, &payload);
    let again = run(text(&first), &payload);
    assert_eq!(
        again.report.operations[0].outcome,
        OpOutcome::AlreadyApplied
    );
}

/// A deletion whose lines end as the context after them (`}` before `}`), sent
/// again after a timeout, is a replay in every format that can carry it: the
/// statement kept before the deleted block, now next to its closing `}`, proves
/// it was made.
#[test]
fn a_resent_deletion_ending_like_its_trailing_context_is_a_replay_in_every_format() {
    let before = "func f() {\n\tx := 1\n\tif x > 0 {\n\t\tprintln(x)\n\t}\n}\n";
    let after = "func f() {\n\tx := 1\n}\n";
    let payloads = [
        block("\tx := 1\n\tif x > 0 {\n\t\tprintln(x)\n\t}\n}\n", "\tx := 1\n}\n"),
        "--- a/f.txt\n+++ b/f.txt\n@@ -2,5 +2,2 @@\n \tx := 1\n-\tif x > 0 {\n-\t\tprintln(x)\n-\t}\n }\n".into(),
        "*** Begin Patch\n*** Update File: f.txt\n@@\n \tx := 1\n-\tif x > 0 {\n-\t\tprintln(x)\n-\t}\n }\n*** End Patch\n".into(),
    ];
    for payload in payloads {
        let first = run(before, &payload);
        assert_eq!(text(&first), after, "{}", first.report);
        let again = run(after, &payload);
        assert_eq!(
            again.report.outcome,
            Outcome::Ok,
            "{payload}\n{}",
            again.report
        );
        assert!(!again.written);
        assert_eq!(
            again.report.operations[0].outcome,
            OpOutcome::AlreadyApplied,
            "{}",
            again.report
        );
    }
    // A mistyped line to delete still stands between the context: no replay.
    let typo = block(
        "\tx := 1\n\tif x > 1 {\n\t\tprintln(x)\n\t}\n}\n",
        "\tx := 1\n}\n",
    );
    assert_eq!(kind(&run(before, &typo)), "not_found");
}

/// An insertion that repeats SEARCH's lines (a function added after one that
/// ends as it does, a line doubled) leaves SEARCH in the file more than once:
/// sent again, every copy lies inside the one place that reads as REPLACE, so
/// it is a replay, not `ambiguous`. A copy outside that place keeps it ambiguous.
#[test]
fn a_resent_insertion_repeating_search_is_a_replay_not_ambiguous() {
    let cases = [
        (
            "def f(x):\n    return x\n\n\nprint(1)\n",
            block(
                "    return x\n",
                "    return x\n\n\ndef g(x):\n    return x\n",
            ),
        ),
        ("a = 1\nb = 2\nc = 3\n", block("b = 2\n", "b = 2\nb = 2\n")),
        (
            "fn a() {\n    one();\n}\n",
            block(
                "    one();\n}\n",
                "    one();\n}\n\nfn b() {\n    one();\n}\n",
            ),
        ),
    ];
    for (file, payload) in cases {
        let first = run(file, &payload);
        assert!(first.written, "{}", first.report);
        let again = run(text(&first), &payload);
        assert_eq!(again.report.outcome, Outcome::Ok, "{}", again.report);
        assert!(!again.written);
        assert_eq!(
            again.report.operations[0].outcome,
            OpOutcome::AlreadyApplied
        );
    }
    let elsewhere = "b = 2\nb = 2\nx = 0\nb = 2\n";
    assert_eq!(
        kind(&run(elsewhere, &block("b = 2\n", "b = 2\nb = 2\n"))),
        "ambiguous"
    );
}

/// Spaces added to a file indented only with tabs: the warning names Python
/// among those that refuse the mix, not only make.
#[test]
fn spaces_added_to_a_tab_indented_file_warn_of_python_too() {
    let r = run_with(
        Some("def f(x):\n\tif x:\n\t\ty()\n"),
        &block("\tif x:\n\t\ty()\n", "\tif x:\n\t\ty()\n        z()\n"),
        &Options {
            syntax_check: editfs_engine::SyntaxCheck::Off,
            ..Options::default()
        },
    );
    says(&warnings(&r), "Python refuses it");
}

/// `unquote` of the Python standard library's `email/utils.py`.
const EMAIL_UNQUOTE: &str = "def unquote(str):\n    \"\"\"Remove quotes from a string.\"\"\"\n    if len(str) > 1:\n        if str.startswith('\"') and str.endswith('\"'):\n            return str[1:-1].replace('\\\\\\\\', '\\\\').replace('\\\\\"', '\"')\n        if str.startswith('<') and str.endswith('>'):\n            return str[1:-1]\n    return str\n";

/// A comment that only sounds like a placeholder is refused by default, and
/// the hint names the per-payload override, which the marker line and the
/// JSON field both give; the report notes it.
#[test]
fn a_comment_that_reads_as_a_placeholder_is_written_when_the_payload_says_so() {
    let search = "        if str.startswith('<') and str.endswith('>'):\n            return str[1:-1]\n    return str\n";
    let replace = "    # Strings without quotes are returned unchanged, the same as before.\n    return str\n";
    let payload = block(search, replace);
    let e = refused(EMAIL_UNQUOTE, &payload, "placeholder");
    let hint = e.hint.unwrap_or_default();
    says(&hint, ":placeholder_check: off");
    says(&hint, "\"placeholder_check\": \"off\"");
    let want = EMAIL_UNQUOTE.replace(search, replace);
    for payload in [
        format!(":placeholder_check: off\n{payload}"),
        payload.replace("SEARCH\n", "SEARCH\n:placeholder_check: off\n"),
        serde_json::json!({"search": search, "replace": replace, "placeholder_check": "off"})
            .to_string(),
    ] {
        let r = run(EMAIL_UNQUOTE, &payload);
        assert_eq!(r.report.outcome, Outcome::Ok, "{payload}: {:?}", r.report);
        assert_eq!(text(&r), want);
        assert!(
            r.report
                .notes
                .iter()
                .any(|n| n.contains("placeholder_check")),
            "{:?}",
            r.report.notes
        );
    }
    // Any other value is a mistake the payload is told of.
    let wrong =
        serde_json::json!({"search": search, "replace": replace, "placeholder_check": "no"});
    let r = run(EMAIL_UNQUOTE, &wrong.to_string());
    assert_eq!((r.report.outcome, r.written), (Outcome::Rejected, false));
    let message = r.report.error.map(|e| e.message).unwrap_or_default();
    says(&message, "`placeholder_check` is `no`");
}
