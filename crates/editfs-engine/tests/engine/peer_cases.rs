//! Replays the test cases of other edit tools (`tests/peer-cases/*.jsonl`; its
//! README says where each comes from, under which license) through our engine
//! with default options.
//!
//! Every case either agrees with the peer or is listed in `DEVIATIONS` with what we
//! do instead and why (the rule of the project's docs that makes us differ).
//! The table is checked both ways: a listed case must still disagree with the peer
//! and must still behave exactly as listed, and every listed id must exist.
//!
//! Agreement: when the peer applied the edit, we must succeed with the same file
//! content; when the peer refused it, we must refuse it too (any error kind) and
//! produce no content.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use editfs_engine::{self as engine, Options, Outcome};
use serde_json::Value;

/// What our engine does with a case.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Ours<S> {
    /// Outcome Ok; the file afterwards (the original when nothing changed).
    Applied(S),
    /// Outcome Failed, with the error kind.
    Failed(S),
    /// Outcome Rejected, with the error kind.
    Rejected(S),
}

/// A case where we deliberately differ from the peer.
struct Deviation {
    id: &'static str,
    ours: Ours<&'static str>,
    why: &'static str,
}

/// Cases where we deliberately differ from the peer. `why` cites the section of
/// the project's docs (`docs/PAGE.md#section`) whose rule makes us differ.
const DEVIATIONS: &[Deviation] = &[
    Deviation {
        id: "cline-disabled-should-handle-special-regex-chars-and-nested-search-markers",
        ours: Ours::Applied("text with replaced\nbefore\nend"),
        why: "docs/payloads.md#marker-blocks, #what-a-transaction-does tier 6: `--- SEARCH` has fewer than 5 marker characters, so it is SEARCH content (a whole line of the file), and `$^.*` is a fragment of a line that occurs once, so it is replaced as text.",
    },
    Deviation {
        id: "aider-replace-multiple-matches-first-wins",
        ours: Ours::Failed("ambiguous"),
        why: "docs/payloads.md#what-a-transaction-does: several matches fail as `ambiguous`, listing every range, so a re-sent edit never silently edits the next occurrence; `--ambiguous first` restores the peer's first-match rule.",
    },
    Deviation {
        id: "vibe-sr-derived-first-occurrence-warning",
        ours: Ours::Failed("ambiguous"),
        why: "docs/payloads.md#what-a-transaction-does: several matches fail as `ambiguous`, listing every range, so a re-sent edit never silently edits the next occurrence; `--ambiguous first` restores the peer's first-match rule.",
    },
    Deviation {
        id: "aider-strip-quoted-wrapping-1",
        ours: Ours::Failed("not_found"),
        why: "docs/payloads.md#what-a-transaction-does: SEARCH must match the file's lines (exactly or by the tolerance ladder); we never strip a filename or fence lines from inside SEARCH.",
    },
    Deviation {
        id: "aider-strip-quoted-wrapping-2",
        ours: Ours::Failed("not_found"),
        why: "docs/payloads.md#what-a-transaction-does: SEARCH must match the file's lines (exactly or by the tolerance ladder); we never strip a filename or fence lines from inside SEARCH.",
    },
    Deviation {
        id: "aider-find-blocks-missing-filename",
        ours: Ours::Applied("One\nTooooo\n\n\noops!\nThree\n"),
        why: "docs/guide.md#several-files-at-once: a filename line is only needed in multi-file payloads; a single-file block needs none (and text outside blocks is ignored), so it applies.",
    },
    Deviation {
        id: "aider-replace-multiple-matches-missing-whitespace",
        ours: Ours::Failed("ambiguous"),
        why: "docs/payloads.md#what-a-transaction-does: a tolerant (indentation) match is used only when it is the single match of its tier, so two indented matches fail.",
    },
    Deviation {
        id: "aider-new-file-created-in-same-folder-file2",
        ours: Ours::Failed("not_found"),
        why: "docs/guide.md#several-files-at-once: our single-file engine applies every block to this file, so the block meant for path/to/a/file1.txt is not found here.",
    },
    Deviation {
        id: "aider-new-file-created-in-same-folder-file1",
        ours: Ours::Failed("file_exists"),
        why: "docs/guide.md#several-files-at-once: our single-file engine applies every block to this file, and the empty SEARCH meant to create file2.txt fails on a non-empty file.",
    },
    Deviation {
        id: "aider-derived-empty-search-appends",
        ours: Ours::Failed("file_exists"),
        why: "docs/payloads.md#what-a-transaction-does: an empty SEARCH creates the file only when it is absent or empty; on a non-empty file it fails.",
    },
    Deviation {
        id: "aider-derived-no-trailing-newline",
        ours: Ours::Applied("one\nTWO"),
        why: "docs/payloads.md#what-a-transaction-does: the presence or absence of a final newline is preserved.",
    },
    Deviation {
        id: "aider-derived-crlf-file",
        ours: Ours::Applied("one\r\nTWO\r\nthree\r\n"),
        why: "docs/payloads.md#what-a-transaction-does: a CRLF file accepts LF blocks (and LF or CRLF search text) and stays CRLF.",
    },
    Deviation {
        id: "anthropic-ref-expandtabs",
        ours: Ours::Applied("if x:\n\treturn 2\n"),
        why: "docs/payloads.md#what-a-transaction-does: bytes outside the matched span never change, so the file's tabs are not expanded.",
    },
    Deviation {
        id: "cline-disabled-should-handle-mixed-line-endings",
        ours: Ours::Applied("line1\r\nline2"),
        why: "docs/payloads.md#what-a-transaction-does: a CRLF file accepts LF blocks (and LF or CRLF search text) and stays CRLF.",
    },
    Deviation {
        id: "cline-disabled-cnfc2-should-handle-custom-nested-search-markers",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#marker-blocks: markers have 5 or more characters, so `--- SEARCH` is no marker and the stray `=======` makes the payload malformed.",
    },
    Deviation {
        id: "cline-disabled-cnfc2-should-handle-text-containing-nested-search-markers",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#marker-blocks: markers have 5 or more characters, so `--- SEARCH` is no marker and the stray `=======` makes the payload malformed.",
    },
    Deviation {
        id: "cline-disabled-cnfc2-should-handle-missing-replacement-marker-in-lenient-mode",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#marker-blocks: markers have 5 or more characters, so `--- SEARCH` is no marker and the stray `=======` makes the payload malformed.",
    },
    Deviation {
        id: "cline-disabled-cnfc2-should-throw-error-for-missing-replacement-marker-in-strict-mode",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#marker-blocks: markers have 5 or more characters, so `--- SEARCH` is no marker and the stray `=======` makes the payload malformed.",
    },
    Deviation {
        id: "cline-disabled-cnfc2-should-handle-long-text-with-multiple-search-replace-blocks",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#marker-blocks: markers have 5 or more characters, so `--- SEARCH` is no marker and the stray `=======` makes the payload malformed.",
    },
    Deviation {
        id: "cline-should-handle-malformed-search-missing-space-case-correctly",
        ours: Ours::Applied("line1\nreplaced\nline3"),
        why: "docs/payloads.md#marker-blocks: we read `-------SEARCH` (no space) as the SEARCH marker, so the otherwise well-formed block applies instead of failing.",
    },
    Deviation {
        id: "cline-should-handle-line-trimmed-match-replacement-case-correctly",
        ours: Ours::Applied("line1\n replaced\nline3"),
        why: "docs/payloads.md#what-a-transaction-does tier 2: REPLACE is re-indented by the same shift as the match, so it keeps the file line's one-space indent.",
    },
    Deviation {
        id: "cline-should-handle-replace-then-delete-case-correctly",
        ours: Ours::Applied("line1\nreplaced\nline3"),
        why: "docs/payloads.md#what-a-transaction-does: the presence or absence of a final newline is preserved.",
    },
    Deviation {
        id: "cline-should-handle-malformed-diff-trailing-space-on-separator-case-correctly",
        ours: Ours::Applied("line1\nreplaced\nline3"),
        why: "docs/payloads.md#marker-blocks: trailing whitespace after a marker is tolerated, so `======= ` is the divider and the block applies.",
    },
    Deviation {
        id: "cline-should-handle-missing-final-replace-marker-when-isfinal-is-true",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#rejected-payloads: a block without its closing REPLACE marker is malformed, so the payload is rejected.",
    },
    Deviation {
        id: "cline-should-handle-missing-final-replace-marker-with-multiple-lines-of-replacement",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#rejected-payloads: a block without its closing REPLACE marker is malformed, so the payload is rejected.",
    },
    Deviation {
        id: "dc-derived-overlapping-count",
        ours: Ours::Failed("count_mismatch"),
        why: "docs/payloads.md#json: expected_replacements counts the non-overlapping occurrences that are replaced; `aa` occurs once in `aaa`, not twice.",
    },
    Deviation {
        id: "oh-str-replace-identical",
        ours: Ours::Applied("This is a test file.\nThis file is for testing purposes."),
        why: "docs/payloads.md#what-a-transaction-does: SEARCH equal to REPLACE is a warning and a no-op, not a failure.",
    },
    Deviation {
        id: "roo-should-handle-mixed-indentation-styles-in-the-same-file",
        ours: Ours::Applied(
            "class Example {\n    constructor() {\n        this.value = 1;\n        if (true) {\n            this.init();\n            this.validate();\n        }\n    }\n}",
        ),
        why: "docs/payloads.md#what-a-transaction-does tier 5: a ragged match keeps the file's indentation on the lines the agent did not change and gives a new line its neighbour's, where the peer writes REPLACE's indentation as given.",
    },
    Deviation {
        id: "roo-should-find-matches-from-middle-out",
        ours: Ours::Failed("ambiguous"),
        why: "docs/payloads.md#what-a-transaction-does: several exact matches fail as `ambiguous`, listing every range; the line number the peer picks by came with its tool call, not in the payload (a `:start_line:` hint would pick the same one).",
    },
    Deviation {
        id: "roo-should-match-content-with-small-differences-90-similar",
        ours: Ours::Failed("not_found"),
        why: "docs/payloads.md#what-a-transaction-does: the tolerance ladder has no similarity-score tier (a wrong edit is worse than an honest failure), so a changed word is not found.",
    },
    Deviation {
        id: "roo-should-match-content-with-extra-whitespace",
        ours: Ours::Failed("not_found"),
        why: "docs/payloads.md#what-a-transaction-does: the tolerance ladder has no tier for extra whitespace inside a line, so it is not found.",
    },
    Deviation {
        id: "roo-should-handle-content-with-line-numbers-at-the-last-line",
        ours: Ours::Failed("not_found"),
        why: "docs/payloads.md#what-a-transaction-does tier 4: line-number prefixes are stripped only when the numbers agree with the lines matched; here they do not.",
    },
    Deviation {
        id: "roo-should-use-aggressive-line-number-stripping-when-line-numbers-are-inco",
        ours: Ours::Failed("not_found"),
        why: "docs/payloads.md#what-a-transaction-does tier 4 strips prefixes copied from a reader; a SEARCH mixing numbered and unnumbered lines is no such copy, so it is not found.",
    },
    Deviation {
        id: "roo-should-handle-mix-of-line-numbered-and-pipe-only-content",
        ours: Ours::Failed("number_prefix"),
        why: "docs/payloads.md#what-a-transaction-does (shapes that would silently destroy code fail with a hint): every REPLACE line carries a reader's consecutive line number while SEARCH, copied without them, has none, so REPLACE came from a numbered view and writing it would put the numbers into the file.",
    },
    Deviation {
        id: "roo-should-handle-pipe-characters-without-numbers-using-aggressive-fallbac",
        ours: Ours::Failed("not_found"),
        why: "docs/payloads.md#what-a-transaction-does tier 4 strips numbered prefixes (`12 | `) only; a bare `| ` is file text to us, so it is not found.",
    },
    Deviation {
        id: "roo-should-handle-different-line-numbers-between-sections",
        ours: Ours::Failed("not_found"),
        why: "docs/payloads.md#what-a-transaction-does tier 4: line-number prefixes are stripped only when the numbers agree with the lines matched; here they do not.",
    },
    Deviation {
        id: "roo-handles-escaping-of-markers-with-custom-suffixes",
        ours: Ours::Failed("not_found"),
        why: "docs/payloads.md#marker-blocks: there are no backslash escapes (longer markers serve that purpose), so the `\\`-prefixed SEARCH lines are not found.",
    },
    Deviation {
        id: "roo-should-not-find-matches-outside-search-range-and-buffer-zone",
        ours: Ours::Applied(
            "function one() {\n    return 1;\n}\n\nfunction two() {\n    return 2;\n}\n\nfunction three() {\n    return 3;\n}\n\nfunction four() {\n    return 4;\n}\n\nfunction five() {\n    return \"five\";\n}",
        ),
        why: "docs/payloads.md#marker-blocks: `:start_line:` only picks the nearest of several matches and does not limit the search, so the single match is used.",
    },
    Deviation {
        id: "roo-should-match-specific-instance-of-duplicate-code-using-line-numbers",
        ours: Ours::Failed("ambiguous"),
        why: "docs/payloads.md#what-a-transaction-does: several exact matches fail as `ambiguous`, listing every range; the line number the peer picks by came with its tool call, not in the payload (a `:start_line:` hint would pick the same one).",
    },
    Deviation {
        id: "roo-should-prioritize-exact-line-match-over-expanded-search",
        ours: Ours::Failed("ambiguous"),
        why: "docs/payloads.md#what-a-transaction-does: several exact matches fail as `ambiguous`, listing every range; the line number the peer picks by came with its tool call, not in the payload (a `:start_line:` hint would pick the same one).",
    },
    Deviation {
        id: "roo-should-fail-when-line-range-is-far-outside-file-bounds",
        ours: Ours::Applied(
            "function one() {\n\t\t  return 1;\n}\n\nfunction two() {\n\t\t  return 2;\n}\n\nfunction three() {\n\t\t  return \"three\";\n}",
        ),
        why: "docs/payloads.md#marker-blocks: `:start_line:` only picks the nearest of several matches and does not limit the search, so the single match is used.",
    },
    Deviation {
        id: "roo-edit_file-create-from-undefined-old",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#what-a-transaction-does: a JSON object without `search` is rejected; creating a file takes an empty `search`.",
    },
    Deviation {
        id: "roo-edit_file-create-empty-file",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#what-a-transaction-does: a JSON object without `search` is rejected; creating a file takes an empty `search`.",
    },
    Deviation {
        id: "roo-edit_file-create-null-old",
        ours: Ours::Rejected("malformed"),
        why: "docs/payloads.md#what-a-transaction-does: a JSON object without `search` is rejected; creating a file takes an empty `search`.",
    },
    Deviation {
        id: "roo-edit_file-ws-tolerant-fallback",
        ours: Ours::Applied("start\nif (true) {\n\treturn 2\n}\nend"),
        why: "docs/payloads.md#what-a-transaction-does tier 2: REPLACE is written in the file's own indentation style (tabs here), never a mix the file did not have.",
    },
    Deviation {
        id: "roo-edit_file-dollar-literal-under-regex",
        ours: Ours::Applied("Line 1\n\tCost: $100\nLine 3"),
        why: "docs/payloads.md#what-a-transaction-does tier 2: REPLACE is written in the file's own indentation style (tabs here), never a mix the file did not have.",
    },
    Deviation {
        id: "roo-edit-identical",
        ours: Ours::Applied("Line 1\nLine 2\nLine 3"),
        why: "docs/payloads.md#what-a-transaction-does: SEARCH equal to REPLACE is a warning and a no-op, not a failure.",
    },
    Deviation {
        id: "roo-search_replace-crlf-file",
        ours: Ours::Applied("Line 1\r\nModified Line 2\r\nLine 3"),
        why: "docs/payloads.md#what-a-transaction-does: a CRLF file accepts LF blocks (and LF or CRLF search text) and stays CRLF.",
    },
    Deviation {
        id: "roo-search_replace-crlf-old-string",
        ours: Ours::Applied("Modified Lines\r\nLine 3"),
        why: "docs/payloads.md#what-a-transaction-does: a CRLF file accepts LF blocks (and LF or CRLF search text) and stays CRLF.",
    },
    Deviation {
        id: "roo-search_replace-lf-old-vs-crlf-file",
        ours: Ours::Applied("Modified Lines\r\nLine 3"),
        why: "docs/payloads.md#what-a-transaction-does: a CRLF file accepts LF blocks (and LF or CRLF search text) and stays CRLF.",
    },
    Deviation {
        id: "vibe-sr-derived-empty-search-prepends",
        ours: Ours::Failed("file_exists"),
        why: "docs/payloads.md#what-a-transaction-does: an empty SEARCH creates the file only when it is absent or empty; on a non-empty file it fails.",
    },
    Deviation {
        id: "vibe-sr-derived-fenced-wins-over-unfenced",
        ours: Ours::Applied("A\nB\n"),
        why: "docs/payloads.md#marker-blocks: every block is applied, fenced or not (text outside blocks is ignored), so the unfenced block is not dropped.",
    },
    Deviation {
        id: "vibe-edit-identical",
        ours: Ours::Applied("hello\n"),
        why: "docs/payloads.md#what-a-transaction-does: SEARCH equal to REPLACE is a warning and a no-op, not a failure.",
    },
];

/// One record of a peer-cases file.
struct Case {
    file: String,
    id: String,
    original: Option<String>,
    payload: String,
    ok: bool,
    content: Option<String>,
    error: Option<String>,
}

fn peer_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engine/peer-cases")
}

fn load_cases() -> Vec<Case> {
    let dir = peer_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "peer cases directory {} is missing or unreadable ({e}); \
             these cases must be present for this test to mean anything",
            dir.display()
        )
    });
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("reading the peer cases directory").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no *.jsonl file in peer cases directory {}",
        dir.display()
    );
    let mut cases = Vec::new();
    for path in &files {
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{file}:{}: not JSON: {e}", n + 1));
            let field = |name: &str| -> &Value {
                v.get(name)
                    .unwrap_or_else(|| panic!("{file}:{}: no `{name}` field", n + 1))
            };
            let string = |x: &Value, what: &str| -> String {
                x.as_str()
                    .unwrap_or_else(|| panic!("{file}:{}: `{what}` is not a string", n + 1))
                    .to_owned()
            };
            let expect = field("expect");
            let opt_string = |x: Option<&Value>, what: &str| -> Option<String> {
                match x {
                    None | Some(Value::Null) => None,
                    Some(x) => Some(string(x, what)),
                }
            };
            cases.push(Case {
                file: file.clone(),
                id: string(field("id"), "id"),
                original: opt_string(Some(field("original")), "original"),
                payload: string(field("payload"), "payload"),
                ok: expect
                    .get("ok")
                    .and_then(Value::as_bool)
                    .unwrap_or_else(|| panic!("{file}:{}: `expect.ok` is not a bool", n + 1)),
                content: opt_string(expect.get("content"), "expect.content"),
                error: opt_string(expect.get("error"), "expect.error"),
            });
        }
    }
    cases
}

/// What we did with a case, in full, for comparison and messages.
struct Run {
    ours: Ours<String>,
    /// Content was produced although the outcome is not Ok (never expected).
    stray_content: bool,
    detail: String,
}

fn run(case: &Case) -> Run {
    let original = case.original.as_deref().map(str::as_bytes);
    let edit = engine::apply(
        "file.txt",
        original,
        case.payload.as_bytes(),
        &Options::default(),
    );
    let report = &edit.report;
    let kind = || {
        report
            .error
            .as_ref()
            .map_or("(no error kind)", |e| e.kind.as_str())
            .to_owned()
    };
    let ours = match report.outcome {
        Outcome::Ok => {
            let bytes = match &edit.content {
                Some(c) => c.clone(),
                None => original.unwrap_or_default().to_vec(),
            };
            Ours::Applied(
                String::from_utf8(bytes)
                    .unwrap_or_else(|e| format!("(not UTF-8: {:?})", e.into_bytes())),
            )
        }
        Outcome::Failed => Ours::Failed(kind()),
        Outcome::Rejected => Ours::Rejected(kind()),
    };
    let mut detail = String::new();
    if let Some(e) = &report.error {
        let _ = write!(detail, "error {}: {}", e.kind, e.message);
        if let Some(h) = &e.hint {
            let _ = write!(detail, "\n      hint: {h}");
        }
    }
    for op in &report.operations {
        for w in &op.warnings {
            let _ = write!(detail, "\n      warning (op {}): {w}", op.index);
        }
    }
    Run {
        ours,
        stray_content: report.outcome != Outcome::Ok && edit.content.is_some(),
        detail,
    }
}

fn agrees(case: &Case, run: &Run) -> bool {
    if case.ok {
        matches!(&run.ours, Ours::Applied(c) if Some(c) == case.content.as_ref())
    } else {
        !matches!(run.ours, Ours::Applied(_)) && !run.stray_content
    }
}

fn expected(case: &Case) -> String {
    if case.ok {
        format!(
            "applied, content {:?}",
            case.content.as_deref().unwrap_or("(none given)")
        )
    } else {
        format!(
            "refused ({})",
            case.error.as_deref().unwrap_or("no kind given")
        )
    }
}

fn owned(o: &Ours<&str>) -> Ours<String> {
    match o {
        Ours::Applied(s) => Ours::Applied(s.to_string()),
        Ours::Failed(s) => Ours::Failed(s.to_string()),
        Ours::Rejected(s) => Ours::Rejected(s.to_string()),
    }
}

#[test]
fn peer_cases_agree_or_are_listed_deviations() {
    let cases = load_cases();
    let ids: BTreeSet<&str> = cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), cases.len(), "peer case ids are not unique");

    let mut problems = Vec::new();
    let mut listed = BTreeSet::new();
    for d in DEVIATIONS {
        if !listed.insert(d.id) {
            problems.push(format!("DEVIATIONS lists {} twice", d.id));
        }
        if !ids.contains(d.id) {
            problems.push(format!("DEVIATIONS lists {}, which is no peer case", d.id));
        }
        assert!(!d.why.is_empty(), "deviation {} has no reason", d.id);
    }

    let mut agreed = 0;
    for case in &cases {
        let run = run(case);
        let agree = agrees(case, &run);
        let deviation = DEVIATIONS.iter().find(|d| d.id == case.id);
        let complaint = match deviation {
            None if agree => {
                agreed += 1;
                continue;
            }
            None => "disagrees with the peer and is not in DEVIATIONS".to_owned(),
            Some(_) if agree => {
                "is in DEVIATIONS but now agrees with the peer: remove the entry".to_owned()
            }
            Some(d) if owned(&d.ours) != run.ours => {
                format!("is in DEVIATIONS as {:?}, but behaves differently", d.ours)
            }
            Some(_) if run.stray_content => {
                "is in DEVIATIONS but produced content without succeeding".to_owned()
            }
            Some(_) => continue,
        };
        let mut msg = format!("{} ({}) {complaint}\n", case.id, case.file);
        let _ = writeln!(msg, "    original: {:?}", case.original);
        let _ = writeln!(msg, "    payload:  {:?}", case.payload);
        let _ = writeln!(msg, "    peer:     {}", expected(case));
        let _ = writeln!(msg, "    ours:     {:?}", run.ours);
        if !run.detail.is_empty() {
            let _ = writeln!(msg, "    report:   {}", run.detail);
        }
        problems.push(msg);
    }

    eprintln!(
        "peer cases: {} in all, {agreed} agree, {} listed deviations",
        cases.len(),
        DEVIATIONS.len()
    );
    assert!(
        problems.is_empty(),
        "{} problem(s) with the peer cases:\n\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Aider cases whose file paths we deliberately read otherwise, and why.
const PATH_DEVIATIONS: &[(&str, &str)] = &[
    (
        "aider-find-filename-2",
        "docs/guide.md#several-files-at-once: a path is relative to the root; Aider matches `file3.py` to `dir/file3.py` by its base name among the files in its chat, which we do not know",
    ),
    (
        "aider-find-filename-6",
        "docs/guide.md#several-files-at-once: Aider guesses `file1_py` means `file1.py` by fuzzy name matching; a line without spaces is a path as written",
    ),
    (
        "aider-find-filename-7",
        "docs/guide.md#several-files-at-once: a Windows path with backslashes names no file beneath a POSIX root",
    ),
];

/// A project holding the files an Aider case had in its chat.
struct Chat(BTreeSet<String>);

impl editfs_engine::payload::Tree for Chat {
    fn locate(&self, written: &str) -> Result<String, editfs_engine::payload::Outside> {
        Ok(written.trim_start_matches("./").to_owned())
    }

    fn entry(&self, rel: &str) -> Option<editfs_engine::payload::Entry> {
        use editfs_engine::payload::Entry;
        let prefix = format!("{rel}/");
        match () {
            _ if self.0.contains(rel) => Some(Entry::File),
            _ if self.0.iter().any(|f| f.starts_with(&prefix)) => Some(Entry::Dir),
            _ => None,
        }
    }
}

/// Aider's payloads name their files: sent to `.editfs/edit`, each block must go
/// to the file Aider sent it to, in the same order.
#[test]
fn aider_payloads_send_each_block_to_aiders_file_through_the_multi_file_parser() {
    let text = std::fs::read_to_string(peer_dir().join("aider.jsonl")).unwrap();
    let mut problems = Vec::new();
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        let id = v["id"].as_str().unwrap();
        let Some(blocks) = v["expect"]["blocks"].as_array() else {
            continue;
        };
        let theirs: Vec<&str> = blocks.iter().filter_map(|b| b["path"].as_str()).collect();
        let params = &v["params"];
        let mut files: BTreeSet<String> = params["files_in_chat"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_owned))
            .collect();
        files.extend(
            params["other_files"]
                .as_object()
                .into_iter()
                .flat_map(|o| o.keys().cloned()),
        );
        if let (Some(t), false) = (v["target"].as_str(), v["original"].is_null()) {
            files.insert(t.to_owned());
        }
        let parsed = editfs_engine::payload::parse_multi(
            v["payload"].as_str().unwrap().as_bytes(),
            100_000,
            &Chat(files),
        );
        let ours: Vec<String> = match parsed {
            Ok((files, _)) => files
                .iter()
                .flat_map(|(p, ops)| std::iter::repeat_n(p.clone(), ops.operations.len()))
                .collect(),
            Err(e) => vec![format!("(rejected: {e})")],
        };
        // Ours come grouped by file, in the order files first appear: compare
        // which file each block went to, not the order of the blocks.
        let mut sorted_theirs: Vec<&str> = theirs.clone();
        let mut sorted_ours: Vec<&str> = ours.iter().map(String::as_str).collect();
        sorted_theirs.sort_unstable();
        sorted_ours.sort_unstable();
        let agree = sorted_theirs == sorted_ours;
        let listed = PATH_DEVIATIONS.iter().any(|(d, _)| *d == id);
        checked += 1;
        match (agree, listed) {
            (true, false) | (false, true) => {}
            (true, true) => problems.push(format!("{id} is in PATH_DEVIATIONS but now agrees")),
            (false, false) => problems.push(format!("{id}: Aider {theirs:?}, ours {ours:?}")),
        }
    }
    assert!(
        checked >= 40,
        "only {checked} Aider cases list their blocks"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
