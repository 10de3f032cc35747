//! Property tests of the edit engine against its rules (docs/payloads.md: formats, and
//! what a transaction does).
//!
//! 1. `apply` never panics and never writes on failure, whatever the payload and file.
//! 2. A transaction never partly applies: one failing block fails them all.
//! 3. An edit followed by its inverse restores the original bytes (blocks and JSON).
//! 4. Bytes outside the matched lines never change.
//! 5. Replaying a successful payload is an `already applied` (or `unchanged`) no-op,
//!    or an honest `not_found`; it never writes.
//! 6. A later tier of the ladder never fires when an earlier one would match.
//! 7. Payloads full of divider-like lines, placeholders and ragged indentation never
//!    panic and never write on failure.
//! 8. An edit with proof of itself (it adds a line, or deletes lines between
//!    context that stands together only once they are gone), sent again as a
//!    SEARCH/REPLACE block, a unified diff or an apply_patch hunk, is
//!    `already applied` and writes nothing, even where its lines repeat the
//!    lines around them.
//!
//! Files are generated as lines over alphabets that hold no marker-like line; a
//! character that the generated files never contain (`@`, `#`) is the token that
//! makes a REPLACE text (or a failing SEARCH) unique, or absent, by construction.

use editfs_engine::{Ambiguity, Edit, OpOutcome, Options, Outcome, apply, sha256_hex};
use proptest::prelude::*;
use proptest::sample::Index;

const BOM: &[u8] = b"\xef\xbb\xbf";

// ---------------------------------------------------------------------------
// Helpers

/// `cases` cases; no regression file is written next to the tests (nothing but
/// this file belongs to these tests), so a failure prints its minimal input only.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(cases)
    }
}

/// The case count of the fuzzing properties: `EDITFS_FUZZ_CASES` when set (as
/// `scripts/fuzz.sh` sets it, to a million or more), else the short run CI makes.
fn fuzz_cases(short: u32) -> u32 {
    std::env::var("EDITFS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(short)
}

fn exact_only() -> Options {
    Options {
        tolerant: false,
        ambiguous: Ambiguity::Error,
        ..Options::default()
    }
}

fn options(tolerant: bool, error_on_ambiguity: bool) -> Options {
    Options {
        tolerant,
        ambiguous: if error_on_ambiguity {
            Ambiguity::Error
        } else {
            Ambiguity::First
        },
        ..Options::default()
    }
}

/// Occurrences of `needle` in `hay`, overlapping ones included.
fn count_runs<T: PartialEq>(hay: &[T], needle: &[T]) -> usize {
    if needle.is_empty() || needle.len() > hay.len() {
        return 0;
    }
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

/// The file's lines as the engine sees them: BOM dropped, `\n` separated, a
/// trailing `\r` dropped, no empty last line when the file ends with a newline.
fn doc_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let body = bytes.strip_prefix(BOM).unwrap_or(bytes);
    if body.is_empty() {
        return Vec::new();
    }
    let body = body.strip_suffix(b"\n").unwrap_or(body);
    body.split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .collect()
}

fn str_lines(lines: &[String]) -> Vec<&[u8]> {
    lines.iter().map(|l| l.as_bytes()).collect()
}

/// Lines as the engine splits a JSON `search` for whole-line matching.
fn text_lines(text: &str) -> Vec<&[u8]> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).as_bytes())
        .collect()
}

/// `text` with bare `\n` turned into `\r\n` (the engine's CRLF retry for JSON).
/// Whether more lines end in CRLF than in LF, as the engine judges a file's line ending.
fn crlf_file(bytes: &[u8]) -> bool {
    let crlf = bytes.windows(2).filter(|w| w == b"\r\n").count();
    let lf = bytes.iter().filter(|&&b| b == b'\n').count() - crlf;
    crlf > lf
}

fn to_crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

fn describe(edit: &Edit) -> String {
    format!(
        "outcome {:?}\n{}\ncontent {:?}",
        edit.report.outcome,
        edit.report,
        edit.content.as_deref().map(String::from_utf8_lossy)
    )
}

/// A line that the payload parser could take for a marker, fence, hint or escape.
fn marker_like(line: &str) -> bool {
    let t = line.trim_start();
    ['<', '-', '=', '>', '+']
        .iter()
        .any(|c| t.starts_with(&c.to_string().repeat(5)))
        || t.starts_with("```")
        || t.starts_with('\\')
        || t.starts_with(':')
}

// ---------------------------------------------------------------------------
// Files

/// A text file: lines, one line ending for all, optional final newline and BOM.
#[derive(Clone, Debug)]
struct FileSpec {
    lines: Vec<String>,
    crlf: bool,
    final_newline: bool,
    bom: bool,
}

impl FileSpec {
    fn eol(&self) -> &'static str {
        if self.crlf { "\r\n" } else { "\n" }
    }

    /// Bytes of lines `range`, each with the terminator it has in the file.
    fn line_bytes(&self, range: std::ops::Range<usize>) -> Vec<u8> {
        let n = self.lines.len();
        let mut out = Vec::new();
        for i in range {
            out.extend_from_slice(self.lines[i].as_bytes());
            if i + 1 < n || self.final_newline {
                out.extend_from_slice(self.eol().as_bytes());
            }
        }
        out
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.bom {
            out.extend_from_slice(BOM);
        }
        out.extend(self.line_bytes(0..self.lines.len()));
        out
    }

    /// The file without its BOM, as text.
    fn body(&self) -> String {
        String::from_utf8(self.line_bytes(0..self.lines.len())).unwrap()
    }
}

/// A line an agent could mean as a placeholder for elided code (`...`, `-- ...`).
fn placeholder_like(line: &str) -> bool {
    let t = line.trim();
    t.starts_with("--") || t.starts_with("..") || t.starts_with('…')
}

/// One file line: a small alphabet (so runs repeat) or a richer one (tabs, trailing
/// spaces, non-ASCII, typographic characters). Never `@` or `#`, never marker-like
/// or placeholder-like.
fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[ab ]{0,3}",
        2 => "[a-z0-9 _(){};.,\t=é’\u{a0}-]{0,12}",
    ]
    .prop_filter("marker-like line", |l| {
        !marker_like(l) && !placeholder_like(l)
    })
}

fn file_spec(max_lines: usize) -> impl Strategy<Value = FileSpec> {
    (
        prop::collection::vec(line(), 1..max_lines),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lines, crlf, final_newline, bom)| {
            // "a\n" without a final newline would read back as one line, not ["a", ""].
            let final_newline = final_newline || lines.last().is_some_and(String::is_empty);
            FileSpec {
                lines,
                crlf,
                final_newline,
                bom,
            }
        })
}

/// Grows lines `start..start + len` to the right, then to the left, until the run
/// occurs once in `lines` (the whole file always does).
fn unique_run(lines: &[String], start: usize, len: usize) -> (usize, usize) {
    let (mut a, mut b) = (start, (start + len).min(lines.len()));
    while count_runs(lines, &lines[a..b]) != 1 {
        if b < lines.len() {
            b += 1;
        } else {
            a -= 1;
        }
    }
    (a, b - a)
}

/// Grows the byte range `a..b` of `text` (at char boundaries) until it occurs once.
fn unique_substring(text: &str, mut a: usize, mut b: usize) -> (usize, usize) {
    let count = |a: usize, b: usize| count_runs(text.as_bytes(), &text.as_bytes()[a..b]);
    while count(a, b) != 1 {
        if b < text.len() {
            b += 1;
            while !text.is_char_boundary(b) {
                b += 1;
            }
        } else {
            a -= 1;
            while !text.is_char_boundary(a) {
                a -= 1;
            }
        }
    }
    (a, b)
}

/// A char-boundary range `a..b` (non-empty) picked by two indices.
fn pick_range(text: &str, i: Index, len: Index) -> (usize, usize) {
    let bounds: Vec<usize> = text.char_indices().map(|(k, _)| k).collect();
    let a = bounds[i.index(bounds.len())];
    let rest: Vec<usize> = text[a..]
        .char_indices()
        .map(|(k, c)| a + k + c.len_utf8())
        .take(12)
        .collect();
    (a, rest[len.index(rest.len())])
}

/// Lines for a REPLACE run: random lines with a line holding the token `@` put at a
/// random place, so the run occurs exactly once wherever it is inserted.
fn new_run() -> impl Strategy<Value = Vec<String>> {
    (
        prop::collection::vec(line(), 0..4),
        "@[a-z ]{0,3}",
        any::<Index>(),
    )
        .prop_map(|(mut lines, token, at)| {
            let at = at.index(lines.len() + 1);
            lines.insert(at, token);
            lines
        })
}

/// A JSON REPLACE text holding the token `@` exactly once.
fn new_text() -> impl Strategy<Value = String> {
    ("[a-z \n]{0,6}", "[a-z \n]{0,6}").prop_map(|(a, b)| format!("{a}@{b}"))
}

// ---------------------------------------------------------------------------
// Payloads

/// How marker blocks are written: marker family and length, fences, payload line ends.
#[derive(Clone, Debug)]
struct Style {
    dashes: bool,
    len: usize,
    fence: Option<&'static str>,
    crlf: bool,
    prose: bool,
}

fn style() -> impl Strategy<Value = Style> {
    (
        any::<bool>(),
        5usize..10,
        prop::option::of(prop_oneof![Just("```"), Just("```rust")]),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(dashes, len, fence, crlf, prose)| Style {
            dashes,
            len,
            fence,
            crlf,
            prose,
        })
}

struct Block<'a> {
    search: &'a [String],
    replace: &'a [String],
    /// `:start_line:` hint (1-based), followed by a `-------` rule.
    hint: Option<usize>,
}

/// Blocks from (SEARCH lines, REPLACE lines, hint) triples.
fn blocks_of(style: &Style, ops: &[(Vec<String>, Vec<String>, Option<usize>)]) -> Vec<u8> {
    let bs: Vec<Block<'_>> = ops
        .iter()
        .map(|(s, r, h)| Block {
            search: s,
            replace: r,
            hint: *h,
        })
        .collect();
    blocks(style, &bs)
}

fn blocks(style: &Style, blocks: &[Block<'_>]) -> Vec<u8> {
    let (open, close) = if style.dashes { ('-', '+') } else { ('<', '>') };
    let n = style.len;
    let mut lines: Vec<String> = Vec::new();
    if style.prose {
        lines.push("Here is the edit:".into());
    }
    if let Some(f) = style.fence {
        lines.push(f.into());
    }
    for b in blocks {
        lines.push(format!("{} SEARCH", open.to_string().repeat(n)));
        if let Some(h) = b.hint {
            lines.push(format!(":start_line:{h}"));
            lines.push("-------".into());
        }
        lines.extend(b.search.iter().cloned());
        lines.push("=".repeat(n));
        lines.extend(b.replace.iter().cloned());
        lines.push(format!("{} REPLACE", close.to_string().repeat(n)));
    }
    if style.fence.is_some() {
        lines.push("```".into());
    }
    let eol = if style.crlf { "\r\n" } else { "\n" };
    let mut out = lines.join(eol);
    out.push_str(eol);
    out.into_bytes()
}

fn one_block(style: &Style, search: &[String], replace: &[String], hint: Option<usize>) -> Vec<u8> {
    blocks(
        style,
        &[Block {
            search,
            replace,
            hint,
        }],
    )
}

fn json_op(search: &str, replace: &str) -> serde_json::Value {
    serde_json::json!({ "search": search, "replace": replace })
}

/// Block lines as a JSON `search`: joined with `\n`, ending in `\n` unless empty.
fn joined(lines: &[String]) -> String {
    let mut s = lines.join("\n");
    if !lines.is_empty() {
        s.push('\n');
    }
    s
}

// ---------------------------------------------------------------------------
// Property 1: arbitrary payloads against arbitrary files

fn fragment() -> impl Strategy<Value = Vec<u8>> {
    let fixed: Vec<&'static [u8]> = vec![
        b"<<<<<<< SEARCH",
        b"<<<<<<<<< SEARCH",
        b"<<<<<<< SEARCH>",
        b"------- SEARCH",
        b"=======",
        b"=========",
        b"=======   ",
        b">>>>>>> REPLACE",
        b">>>>>>>>> REPLACE",
        b"+++++++ REPLACE",
        b"\\=======",
        b"\\>>>>>>> REPLACE",
        b"```",
        b"```rust",
        b":start_line:",
        b":start_line:0",
        b":start_line:3",
        b":start_line:99999999999999999999999",
        b":end_line:2",
        b"-------",
        b"---",
        b"{",
        b"}",
        b"[",
        b"]",
        b"\"search\": ",
        b"\"replace\": \"x\"",
        b"\"old_str\": \"a\"",
        b"\"regex\": true",
        b"\"all\": true",
        b"\"start_line\": 0",
        b"\"end_line\": 18446744073709551615",
        b"\"expected_replacements\": 2",
        b"\"if_match\": \"00\"",
        b",",
        b":",
        b"\"",
        b"\r\n",
        b"\n",
        b"\r",
        b"\t",
        b"\xef\xbb\xbf",
        b"\0",
        b"\xff\xfe",
        b"\xc3",
        b"12 | a",
        b"\xe2\x80\x9cq\xe2\x80\x9d",
        b"\xc2\xa0",
        b"a",
        b"b",
        b"  a  ",
        b"\ta",
    ];
    prop_oneof![
        5 => prop::sample::select(fixed).prop_map(<[u8]>::to_vec),
        2 => "[ab \t]{0,6}".prop_map(String::into_bytes),
        1 => prop::collection::vec(any::<u8>(), 0..6),
    ]
}

fn fragment_payload() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        (
            fragment(),
            prop_oneof![Just("\n"), Just("\r\n"), Just(""), Just(" ")],
        ),
        0..40,
    )
    .prop_map(|parts| {
        let mut out = Vec::new();
        for (p, sep) in parts {
            out.extend(p);
            out.extend_from_slice(sep.as_bytes());
        }
        out
    })
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        prop_oneof![
            Just(0u64),
            Just(1),
            Just(2),
            Just(3),
            Just(7),
            Just(u64::MAX)
        ]
        .prop_map(Value::from),
        Just(Value::from(-1)),
        Just(Value::from(1.5)),
        "[ab \n.*+?()|^$\\\\\\[\\]{}]{0,6}".prop_map(Value::from),
    ]
}

fn json_payload() -> impl Strategy<Value = Vec<u8>> {
    let text = prop_oneof![
        "[ab \t\n]{0,8}",
        "[ab.*+?()|^$\\\\\\[\\]{}\n]{0,6}",
        "[ab$1{}\n]{0,6}",
        "[ab’“—\u{a0}\r\n]{0,6}",
    ];
    let keys = prop::sample::select(vec![
        "regex",
        "ignore_case",
        "start_line",
        "end_line",
        "all",
        "replace_all",
        "expected_replacements",
        "if_match",
        "path",
        "colour",
    ]);
    let op = (
        prop::option::weighted(0.9, text.clone()),
        prop::option::weighted(0.8, text),
        any::<bool>(),
        prop::collection::vec((keys, json_value()), 0..4),
    )
        .prop_map(|(search, replace, old_names, extra)| {
            let mut map = serde_json::Map::new();
            let (s, r) = if old_names {
                ("old_str", "new_str")
            } else {
                ("search", "replace")
            };
            if let Some(v) = search {
                map.insert(s.into(), v.into());
            }
            if let Some(v) = replace {
                map.insert(r.into(), v.into());
            }
            for (k, v) in extra {
                map.insert(k.into(), v);
            }
            serde_json::Value::Object(map)
        });
    (
        prop::collection::vec(op, 1..4),
        any::<bool>(),
        prop::option::weighted(0.2, any::<Index>()),
    )
        .prop_map(|(ops, array, cut)| {
            let value = if array || ops.len() > 1 {
                serde_json::Value::Array(ops)
            } else {
                ops.into_iter().next().unwrap()
            };
            let mut bytes = serde_json::to_vec(&value).unwrap();
            if let Some(c) = cut {
                bytes.truncate(c.index(bytes.len() + 1));
            }
            bytes
        })
}

/// Lines for blocks and files of property 1: near misses for every tolerance tier.
fn fuzzy_line() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[ab]{0,3}",
        2 => "[ \t]{0,2}[ab'\"’“—\u{a0}-]{0,3}[ \t]{0,2}",
        1 => "[1-3]{1,2}( \\| |: |\t)[ab]{0,2}",
        1 => "[ab@]{0,3}",
    ]
}

fn block_payload() -> impl Strategy<Value = Vec<u8>> {
    (
        style(),
        prop::collection::vec(
            (
                prop::collection::vec(fuzzy_line(), 0..4),
                prop::collection::vec(fuzzy_line(), 0..4),
                prop::option::weighted(0.2, 1usize..8),
            ),
            1..4,
        ),
    )
        .prop_map(|(style, bs)| blocks_of(&style, &bs))
}

fn any_payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => prop::collection::vec(any::<u8>(), 0..300),
        4 => fragment_payload(),
        3 => json_payload(),
        4 => block_payload(),
    ]
}

fn text_file() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(fuzzy_line(), 0..12),
        prop_oneof![Just("\n"), Just("\r\n")],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lines, eol, last, bom)| {
            let mut s = if bom {
                "\u{feff}".to_owned()
            } else {
                String::new()
            };
            s.push_str(&lines.join(eol));
            if last {
                s.push_str(eol);
            }
            s.into_bytes()
        })
}

fn any_file() -> impl Strategy<Value = Option<Vec<u8>>> {
    let broken = (
        text_file(),
        any::<Index>(),
        prop::sample::select(vec![0xffu8, 0xc3, 0x80, 0]),
    )
        .prop_map(|(mut t, at, b)| {
            let at = at.index(t.len() + 1);
            t.insert(at, b);
            t
        });
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(Vec::new())),
        2 => prop::collection::vec(any::<u8>(), 0..200).prop_map(Some),
        6 => text_file().prop_map(Some),
        2 => broken.prop_map(Some),
    ]
}

/// A SEARCH line copied from the file, as an agent might garble it: trailing
/// whitespace, shifted indentation, typographic characters, a line-number prefix
/// (right or off by one).
fn garble(line: &str, number: usize, how: u8) -> String {
    match how % 8 {
        0..=2 => line.to_owned(),
        3 => format!("{line}  "),
        4 => format!("  {line}"),
        5 => format!("\t{}", line.trim_start()),
        6 => line
            .replace('\'', "’")
            .replace('"', "“")
            .replace('-', "—")
            .replace(' ', "\u{a0}"),
        _ => format!("{} | {line}", number + usize::from(how > 200)),
    }
}

/// A text file and a payload whose SEARCH texts are (garbled) runs of its lines, so
/// that many transactions apply, exactly or through the tolerance ladder.
fn file_and_derived_payload() -> impl Strategy<Value = (Option<Vec<u8>>, Vec<u8>)> {
    (
        prop::collection::vec(fuzzy_line(), 1..12),
        prop_oneof![Just("\n"), Just("\r\n")],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(|(lines, eol, last, bom)| {
            let n = lines.len();
            let op = (
                0..n,
                1usize..4,
                prop::collection::vec(fuzzy_line(), 0..3),
                any::<u8>(),
                prop::option::weighted(0.2, 1usize..12),
            );
            (
                Just((lines, eol, last, bom)),
                prop::collection::vec(op, 1..4),
                style(),
                any::<bool>(),
            )
        })
        .prop_map(|((lines, eol, last, bom), ops, style, json)| {
            let mut file = if bom {
                "\u{feff}".to_owned()
            } else {
                String::new()
            };
            file.push_str(&lines.join(eol));
            if last {
                file.push_str(eol);
            }
            let ops: Vec<(Vec<String>, Vec<String>, Option<usize>)> = ops
                .into_iter()
                .map(|(s, l, replace, how, hint)| {
                    let end = (s + l).min(lines.len());
                    let search = (s..end).map(|i| garble(&lines[i], i + 1, how)).collect();
                    (search, replace, hint)
                })
                .collect();
            let payload = if json {
                let ops: Vec<serde_json::Value> = ops
                    .iter()
                    .map(|(s, r, _)| json_op(&joined(s), &joined(r)))
                    .collect();
                serde_json::to_vec(&ops).unwrap()
            } else {
                blocks_of(&style, &ops)
            };
            (Some(file.into_bytes()), payload)
        })
}

fn file_and_payload() -> impl Strategy<Value = (Option<Vec<u8>>, Vec<u8>)> {
    prop_oneof![
        2 => (any_file(), any_payload()),
        1 => file_and_derived_payload(),
    ]
}

fn any_options() -> impl Strategy<Value = Options> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::option::weighted(0.1, 0usize..200),
    )
        .prop_map(|(tolerant, error, limit)| {
            let mut o = options(tolerant, error);
            if let Some(l) = limit {
                o.max_payload = l;
            }
            o
        })
}

proptest! {
    #![proptest_config(config(fuzz_cases(3000)))]

    #[test]
    fn never_panics_never_writes_on_failure(
        (file, payload) in file_and_payload(),
        opts in any_options(),
    ) {
        let edit = apply("f.txt", file.as_deref(), &payload, &opts);
        let report = &edit.report;
        if report.outcome != Outcome::Ok {
            prop_assert!(edit.content.is_none(), "wrote on failure: {}", describe(&edit));
        }
        // Content only when the file changes or is created.
        if let Some(new) = &edit.content {
            prop_assert_eq!(report.outcome, Outcome::Ok);
            prop_assert!(file.as_deref() != Some(new.as_slice()), "rewrote identical bytes");
        }
        if report.outcome == Outcome::Ok && edit.content.is_none() {
            prop_assert!(file.is_some(), "created nothing: {}", describe(&edit));
        }
        // The report's sha256 is that of the file after the transaction.
        let after = edit.content.as_deref().or(file.as_deref()).unwrap_or_default();
        prop_assert_eq!(&report.sha256, &sha256_hex(after));
        let json: serde_json::Value = serde_json::from_str(&report.to_json())
            .map_err(|e| TestCaseError::fail(format!("report JSON does not parse: {e}")))?;
        let want = match report.outcome {
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Rejected => "rejected",
        };
        prop_assert_eq!(json.get("outcome").and_then(|v| v.as_str()), Some(want), "{}", json);
        let text = report.to_string();
        prop_assert!(text.ends_with('\n'), "the text report ends without a newline: {:?}", text);
    }
}

// ---------------------------------------------------------------------------
// Property 2: one failing block fails the transaction, and nothing is written

#[derive(Clone, Debug)]
struct Partial {
    file: FileSpec,
    /// Per applying operation: its first line, line count and REPLACE lines.
    edits: Vec<(usize, usize, Vec<String>)>,
    /// The failing operation's SEARCH and REPLACE (both hold `#`, absent from the file).
    bad_search: Vec<String>,
    bad_replace: Vec<String>,
    bad_at: usize,
}

fn partial() -> impl Strategy<Value = Partial> {
    let suffix = "[a-z0-9 .]{0,6}";
    (
        prop::collection::vec(suffix, 2..14),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(move |(suffixes, crlf, final_newline, bom)| {
            let n = suffixes.len();
            let lines: Vec<String> = suffixes
                .iter()
                .enumerate()
                .map(|(i, s)| format!("L{i}|{s}"))
                .collect();
            let file = FileSpec {
                lines,
                crlf,
                final_newline,
                bom,
            };
            // Disjoint runs of 1 or 2 lines, at most 5 of them.
            let runs = prop::collection::vec((any::<bool>(), 1usize..3, any::<bool>()), n)
                .prop_map(move |picks| {
                    let mut out = Vec::new();
                    let mut i = 0;
                    for (take, len, _) in picks {
                        if i >= n {
                            break;
                        }
                        let len = len.min(n - i);
                        if take && out.len() < 5 {
                            out.push((i, len));
                        }
                        i += len;
                    }
                    out
                });
            (
                Just(file),
                runs,
                prop::collection::vec(prop::collection::vec("R[a-z .]{0,6}", 0..3), 5),
                prop::collection::vec("[a-z .]{0,6}", 0..3),
                "#[a-z ]{0,4}",
                any::<Index>(),
                prop::collection::vec("[a-z .#]{0,5}", 0..3),
                any::<Index>(),
            )
        })
        .prop_map(
            |(file, runs, replaces, copied, token, token_at, bad_replace, bad_at)| {
                // A near miss: file-like lines with the absent token among them.
                let mut bad_search: Vec<String> =
                    copied.iter().map(|c| format!("L1|{c}")).collect();
                bad_search.insert(token_at.index(bad_search.len() + 1), token.clone());
                let mut bad_replace = bad_replace;
                if !bad_replace.is_empty() && !bad_replace.iter().any(|l| l.contains('#')) {
                    bad_replace.push(token);
                }
                let edits: Vec<(usize, usize, Vec<String>)> = runs
                    .into_iter()
                    .zip(replaces)
                    .map(|((s, l), r)| (s, l, r))
                    .collect();
                let bad_at = bad_at.index(edits.len() + 1);
                Partial {
                    file,
                    edits,
                    bad_search,
                    bad_replace,
                    bad_at,
                }
            },
        )
}

fn partial_payload(p: &Partial, with_bad: bool, json: bool, style: &Style) -> Vec<u8> {
    let mut ops: Vec<(Vec<String>, Vec<String>)> = p
        .edits
        .iter()
        .map(|(s, l, r)| (p.file.lines[*s..s + l].to_vec(), r.clone()))
        .collect();
    if with_bad {
        ops.insert(p.bad_at, (p.bad_search.clone(), p.bad_replace.clone()));
    }
    if json {
        let ops: Vec<serde_json::Value> = ops
            .iter()
            .map(|(s, r)| json_op(&joined(s), &joined(r)))
            .collect();
        serde_json::to_vec(&ops).unwrap()
    } else {
        let bs: Vec<Block<'_>> = ops
            .iter()
            .map(|(s, r)| Block {
                search: s,
                replace: r,
                hint: None,
            })
            .collect();
        blocks(style, &bs)
    }
}

proptest! {
    #![proptest_config(config(fuzz_cases(800)))]

    #[test]
    fn never_partly_applies(
        p in partial(),
        json in any::<bool>(),
        style in style(),
        tolerant in any::<bool>(),
        error in any::<bool>(),
    ) {
        let opts = options(tolerant, error);
        let original = p.file.bytes();
        // Without the failing operation the others apply (when there are any).
        if !p.edits.is_empty() {
            let good = partial_payload(&p, false, json, &style);
            let edit = apply("f.txt", Some(&original), &good, &opts);
            // Edits the engine refuses as putting lines in the file twice (an
            // earlier edit's lines beside a later one's REPLACE) are no case of
            // this property.
            let kind = edit.report.error.as_ref().map(|e| e.kind.as_str());
            prop_assume!(kind != Some("duplicates"));
            prop_assert_eq!(edit.report.outcome, Outcome::Ok, "{}", describe(&edit));
        }
        let payload = partial_payload(&p, true, json, &style);
        let edit = apply("f.txt", Some(&original), &payload, &opts);
        prop_assert_eq!(edit.report.outcome, Outcome::Failed, "{}", describe(&edit));
        prop_assert!(edit.content.is_none(), "partial write: {}", describe(&edit));
        let ops = &edit.report.operations;
        prop_assert_eq!(ops.len(), p.edits.len() + 1);
        for (k, op) in ops.iter().enumerate() {
            let want = if k == p.bad_at { OpOutcome::Failed } else { OpOutcome::Matched };
            prop_assert_eq!(op.outcome, want, "operation {}: {}", k + 1, describe(&edit));
        }
        let error = edit.report.error.as_ref().expect("a failed report names its error");
        prop_assert_eq!(error.operation, Some(p.bad_at + 1));
        prop_assert_eq!(edit.report.sha256.clone(), sha256_hex(&original));
    }
}

// ---------------------------------------------------------------------------
// Properties 3-5: single edits of a unique run

/// A file, a run of lines unique in it, and a REPLACE run holding the token `@`.
#[derive(Clone, Debug)]
struct LineEdit {
    file: FileSpec,
    start: usize,
    len: usize,
    new: Vec<String>,
}

impl LineEdit {
    fn run(&self) -> &[String] {
        &self.file.lines[self.start..self.start + self.len]
    }
}

fn line_edit(new: impl Strategy<Value = Vec<String>>) -> impl Strategy<Value = LineEdit> {
    (file_spec(14), any::<Index>(), 1usize..4, new)
        .prop_map(|(file, at, len, new)| {
            let (start, len) = unique_run(&file.lines, at.index(file.lines.len()), len);
            let mut new = new;
            // A file that is one line without a terminator has no line-ending style to
            // go back to: replacing a whole CRLF file without a final newline by one
            // line loses its CRLF-ness for good, so the REPLACE run gets two lines.
            if len == file.lines.len() && !file.final_newline && new.len() == 1 {
                new.push("z".into());
            }
            // As for files: the last line of a file without a final newline cannot be
            // empty ("a\n" reads back as ["a"], not ["a", ""]), so a REPLACE run put
            // there does not end with an empty line.
            if start + len == file.lines.len()
                && !file.final_newline
                && let Some(last) = new.last_mut().filter(|l| l.is_empty())
            {
                last.push('z');
            }
            LineEdit {
                file,
                start,
                len,
                new,
            }
        })
        .prop_filter("REPLACE or SEARCH repeats the lines around it", |e| {
            [&e.new[..], e.run()]
                .iter()
                .all(|run| !ends_with_what_follows(e, run) && !starts_with_what_precedes(e, run))
        })
}

/// The mirror of `ends_with_what_follows`, refused alike.
fn starts_with_what_precedes(e: &LineEdit, run: &[String]) -> bool {
    let before = &e.file.lines[..e.start];
    (2..=run.len().min(before.len())).any(|k| {
        run[..k]
            .iter()
            .zip(&before[before.len() - k..])
            .all(|(r, b)| r.trim_end() == b.trim_end())
    })
}

/// Whether `run` ends with two lines or more that follow SEARCH in the file:
/// the engine refuses such a REPLACE (`duplicates`, SEARCH stopped short), so
/// neither an edit nor its inverse may have one.
fn ends_with_what_follows(e: &LineEdit, run: &[String]) -> bool {
    let after = &e.file.lines[e.start + e.len..];
    (2..=run.len().min(after.len())).any(|k| {
        run[run.len() - k..]
            .iter()
            .zip(after)
            .all(|(r, a)| r.trim_end() == a.trim_end())
    })
}

/// A file and a substring of its body that occurs once in it.
#[derive(Clone, Debug)]
struct TextEdit {
    file: FileSpec,
    search: String,
    replace: String,
}

fn text_edit(replace: impl Strategy<Value = String>) -> impl Strategy<Value = TextEdit> {
    (file_spec(10), any::<Index>(), any::<Index>(), replace)
        .prop_filter("empty body", |(f, ..)| !f.body().is_empty())
        .prop_map(|(file, at, len, replace)| {
            let body = file.body();
            let (a, b) = pick_range(&body, at, len);
            let (a, b) = unique_substring(&body, a, b);
            TextEdit {
                search: body[a..b].to_owned(),
                file,
                replace,
            }
        })
        // Cut out of a line (`aa;_...`), SEARCH may be an ellipsis alone: the
        // inverse edit's REPLACE would then stand for the lines it drops.
        .prop_filter("placeholder-like SEARCH", |e| {
            !e.search.lines().any(placeholder_like)
        })
        // A SEARCH that cuts a CRLF file's `\r\n` in two is taken byte for
        // byte, REPLACE too, and leaves a `\r` or `\n` alone: no inverse edit
        // or replay can be written for it in the file's own line endings.
        .prop_filter("SEARCH cuts a line ending", |e| {
            let s = e.search.as_bytes();
            s.iter().enumerate().all(|(i, &c)| match c {
                b'\n' if e.file.crlf => i > 0 && s[i - 1] == b'\r',
                b'\r' => s.get(i + 1) == Some(&b'\n'),
                _ => true,
            })
        })
}

proptest! {
    #![proptest_config(config(600))]

    #[test]
    fn edit_then_inverse_restores_the_bytes_blocks(
        e in line_edit(new_run()),
        style in style(),
        hint in any::<bool>(),
    ) {
        let original = e.file.bytes();
        let opts = exact_only();
        let hint = hint.then_some(e.start + 1);
        let forward = one_block(&style, e.run(), &e.new, hint);
        let edit = apply("f.txt", Some(&original), &forward, &opts);
        prop_assert_eq!(edit.report.outcome, Outcome::Ok, "{}", describe(&edit));
        let changed = edit.content.clone();
        prop_assert!(changed.is_some(), "nothing written: {}", describe(&edit));
        let changed = changed.unwrap();
        let back = one_block(&style, &e.new, e.run(), hint);
        let edit = apply("f.txt", Some(&changed), &back, &opts);
        prop_assert_eq!(edit.report.outcome, Outcome::Ok, "{}", describe(&edit));
        let restored = edit.content.unwrap_or(changed);
        prop_assert_eq!(
            String::from_utf8_lossy(&restored),
            String::from_utf8_lossy(&original)
        );
        prop_assert_eq!(restored, original);
    }

    #[test]
    fn edit_then_inverse_restores_the_bytes_json(e in text_edit(new_text())) {
        let original = e.file.bytes();
        let opts = exact_only();
        let forward = serde_json::to_vec(&json_op(&e.search, &e.replace)).unwrap();
        let edit = apply("f.txt", Some(&original), &forward, &opts);
        prop_assert_eq!(edit.report.outcome, Outcome::Ok, "{}", describe(&edit));
        let changed = edit.content.clone();
        prop_assert!(changed.is_some(), "nothing written: {}", describe(&edit));
        let changed = changed.unwrap();
        // An edit that removes every CRLF leaves nothing to tell the inverse which
        // ending to write back.
        prop_assume!(crlf_file(&changed) == crlf_file(&original));
        let back = serde_json::to_vec(&json_op(&e.replace, &e.search)).unwrap();
        let edit = apply("f.txt", Some(&changed), &back, &opts);
        prop_assert_eq!(edit.report.outcome, Outcome::Ok, "{}", describe(&edit));
        let restored = edit.content.unwrap_or(changed);
        prop_assert_eq!(
            String::from_utf8_lossy(&restored),
            String::from_utf8_lossy(&original)
        );
        prop_assert_eq!(restored, original);
    }
}

proptest! {
    #![proptest_config(config(800))]

    #[test]
    fn bytes_outside_the_match_never_change(
        e in line_edit(prop::collection::vec(line(), 0..4)),
        style in style(),
        tolerant in any::<bool>(),
    ) {
        let f = &e.file;
        let original = f.bytes();
        let end = e.start + e.len;
        let n = f.lines.len();
        let payload = one_block(&style, e.run(), &e.new, None);
        let edit = apply("f.txt", Some(&original), &payload, &options(tolerant, true));
        prop_assert_eq!(edit.report.outcome, Outcome::Ok, "{}", describe(&edit));
        if edit.report.operations[0].outcome == OpOutcome::AlreadyApplied {
            // Only where the file around SEARCH already reads as REPLACE (replay rule b).
            let run = e.run();
            let reads = (0..=e.new.len().saturating_sub(e.len)).any(|k| {
                e.new[k..].starts_with(run)
                    && e.start >= k
                    && f.lines.get(e.start - k..e.start - k + e.new.len()) == Some(&e.new[..])
            });
            prop_assert!(reads && edit.content.is_none(), "{}", describe(&edit));
            return Ok(());
        }
        let result = edit.content.unwrap_or_else(|| original.clone());
        let mut prefix = if f.bom { BOM.to_vec() } else { Vec::new() };
        prefix.extend(f.line_bytes(0..e.start));
        let suffix = f.line_bytes(end..n);
        // Deleting the last lines of a file without a final newline: the line before
        // them becomes the last line and, to keep the file without a final newline
        // (docs/payloads.md#what-a-transaction-does), loses its terminator. That terminator is all that may change.
        if e.new.is_empty() && end == n && !f.final_newline && e.start > 0 {
            prefix.truncate(prefix.len() - f.eol().len());
        }
        prop_assert!(
            result.len() >= prefix.len() + suffix.len()
                && result.starts_with(&prefix)
                && result.ends_with(&suffix),
            "outside bytes changed:\noriginal {:?}\nresult   {:?}\nprefix   {:?}\nsuffix   {:?}",
            String::from_utf8_lossy(&original),
            String::from_utf8_lossy(&result),
            String::from_utf8_lossy(&prefix),
            String::from_utf8_lossy(&suffix)
        );
        // What lies between is the REPLACE lines, in some line ending.
        let middle = String::from_utf8_lossy(&result[prefix.len()..result.len() - suffix.len()])
            .replace("\r\n", "\n");
        let middle = middle.strip_suffix('\n').unwrap_or(&middle);
        prop_assert_eq!(middle, e.new.join("\n"));
    }
}

/// A re-sent edit never writes. It is a no-op success, or, where the evidence
/// does not show it was made at SEARCH's own place (REPLACE only repeats SEARCH's
/// lines, or another region resembles SEARCH at least as much), an honest `not_found`.
fn replay_is_a_no_op_or_not_found(second: &Edit, same: bool) -> Result<(), TestCaseError> {
    let op = &second.report.operations[0];
    match second.report.outcome {
        Outcome::Ok => prop_assert!(
            matches!(op.outcome, OpOutcome::AlreadyApplied | OpOutcome::Unchanged),
            "{:?}: {}",
            op.outcome,
            describe(second)
        ),
        _ => {
            prop_assert!(!same, "{}", describe(second));
            let kind = second.report.error.as_ref().map(|e| e.kind.as_str());
            prop_assert_eq!(kind, Some("not_found"), "{}", describe(second));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(600))]

    #[test]
    fn replaying_a_block_changes_nothing(
        e in line_edit(new_run()),
        same in prop::bool::weighted(0.2),
        style in style(),
    ) {
        let opts = exact_only();
        let original = e.file.bytes();
        let new: Vec<String> = if same { e.run().to_vec() } else { e.new.clone() };
        let payload = one_block(&style, e.run(), &new, None);
        let first = apply("f.txt", Some(&original), &payload, &opts);
        prop_assert_eq!(first.report.outcome, Outcome::Ok, "{}", describe(&first));
        let result = first.content.unwrap_or_else(|| original.clone());
        let lines = doc_lines(&result);
        // Preconditions of a replay: SEARCH gone (unless it is REPLACE), REPLACE there once.
        if !same {
            prop_assume!(count_runs(&lines, &str_lines(e.run())) == 0);
        }
        prop_assert_eq!(count_runs(&lines, &str_lines(&new)), 1);
        let second = apply("f.txt", Some(&result), &payload, &opts);
        prop_assert!(second.content.is_none(), "replay wrote: {}", describe(&second));
        replay_is_a_no_op_or_not_found(&second, same)?;
    }

    #[test]
    fn replaying_a_json_edit_changes_nothing(
        e in text_edit(new_text()),
        same in prop::bool::weighted(0.2),
    ) {
        let opts = exact_only();
        let original = e.file.bytes();
        let replace = if same { e.search.clone() } else { e.replace.clone() };
        let payload = serde_json::to_vec(&json_op(&e.search, &replace)).unwrap();
        let first = apply("f.txt", Some(&original), &payload, &opts);
        prop_assert_eq!(first.report.outcome, Outcome::Ok, "{}", describe(&first));
        let result = first.content.unwrap_or_else(|| original.clone());
        // Preconditions of a replay: SEARCH gone (as a literal, in its CRLF form, and
        // as whole lines), unless it is REPLACE; REPLACE there once.
        if !same {
            prop_assume!(count_runs(&result, e.search.as_bytes()) == 0);
            prop_assume!(count_runs(&result, to_crlf(&e.search).as_bytes()) == 0);
            prop_assume!(count_runs(&doc_lines(&result), &text_lines(&e.search)) == 0);
        }
        // In a CRLF file the engine writes an LF-only REPLACE with CRLF.
        let written = match crlf_file(&result) && !replace.contains('\r') {
            true => to_crlf(&replace),
            false => replace.clone(),
        };
        prop_assert_eq!(count_runs(&result, written.as_bytes()), 1);
        let second = apply("f.txt", Some(&result), &payload, &opts);
        prop_assert!(second.content.is_none(), "replay wrote: {}", describe(&second));
        replay_is_a_no_op_or_not_found(&second, same)?;
    }
}

// ---------------------------------------------------------------------------
// Property 6: the ladder's order

/// The rank of a strategy on the ladder; whole-line tiers before `substring`.
fn rank(strategy: &str) -> usize {
    const LADDER: [&str; 7] = [
        "exact",
        "whitespace",
        "indentation",
        "typography",
        "line_numbers",
        "ragged",
        "substring",
    ];
    LADDER
        .iter()
        .position(|s| *s == strategy)
        .unwrap_or(usize::MAX)
}

/// SEARCH as the file's own run, changed only in a way that `tier` forgives:
/// nothing (exact), trailing spaces (whitespace), one more tab of indentation on
/// every line (indentation: a uniform shift at every tab width).
fn perturbed(run: &[String], tier: usize) -> Vec<String> {
    run.iter()
        .map(|l| match tier {
            0 => l.clone(),
            1 => format!("{l}  "),
            _ if l.trim().is_empty() => l.clone(),
            _ => format!("\t{l}"),
        })
        .collect()
}

proptest! {
    #![proptest_config(config(1500))]

    #[test]
    fn a_later_tier_never_fires_when_an_earlier_one_would(
        e in line_edit(new_run()),
        tier in 0usize..3,
        style in style(),
    ) {
        // Blank lines alone are no SEARCH a tolerant tier can place.
        prop_assume!(tier == 0 || e.run().iter().any(|l| !l.trim().is_empty()));
        let search = perturbed(e.run(), tier);
        let payload = one_block(&style, &search, &e.new, None);
        let original = e.file.bytes();
        let edit = apply("f.txt", Some(&original), &payload, &Options::default());
        match edit.report.outcome {
            Outcome::Ok => {
                let strategy = edit.report.operations[0].strategy.unwrap_or_default();
                prop_assert!(rank(strategy) <= tier, "tier {}: {}", tier, describe(&edit));
            }
            _ => {
                // Only an earlier or equal tier finding several places may stop
                // it, or a place found elsewhere whose following lines REPLACE
                // ends with.
                let kind = edit.report.error.as_ref().map(|e| e.kind.as_str());
                prop_assert!(
                    matches!(kind, Some("ambiguous" | "duplicates")),
                    "tier {}: {}", tier, describe(&edit)
                );
            }
        }
    }
}

/// Lines that exercise the newer readings: divider-like lines, placeholders,
/// ragged indentation and fragments of lines.
fn tricky_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("=======".to_owned()),
        Just("...".to_owned()),
        Just("    # ... rest unchanged".to_owned()),
        Just("// ... existing code ...".to_owned()),
        "[ \t]{0,6}[ab(]{1,3}[ ;.]{0,2}",
    ]
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn tricky_shapes_never_panic_and_never_write_on_failure(
        file in prop::collection::vec(tricky_line(), 0..10),
        search in prop::collection::vec(tricky_line(), 0..5),
        middle in prop::collection::vec(tricky_line(), 0..3),
        replace in prop::collection::vec(tricky_line(), 0..5),
        first in any::<bool>(),
    ) {
        let file = joined(&file);
        let payload = format!(
            "<<<<<<< SEARCH\n{}=======\n{}{}>>>>>>> REPLACE\n",
            joined(&search),
            joined(&middle),
            joined(&replace),
        );
        let opts = options(true, !first);
        let edit = apply("f.txt", Some(file.as_bytes()), payload.as_bytes(), &opts);
        if edit.report.outcome != Outcome::Ok {
            prop_assert!(edit.content.is_none(), "{}", describe(&edit));
        }
        prop_assert!(edit.report.to_string().ends_with('\n'));
    }
}

// ---------------------------------------------------------------------------
// Property 8: a re-sent edit with proof of itself is a replay

/// Code-like lines: statements and closing braces, which repeat as in real
/// code. Statements are named apart later (`name_apart`).
fn code_run() -> impl Strategy<Value = Vec<bool>> {
    prop::collection::vec(prop::bool::weighted(0.3), 1..4)
}

/// Names unlike one another, as real statements are: `s1()` and `s4()` resemble
/// each other so much that no region would be SEARCH's closest on its own.
const NAMES: [&str; 25] = [
    "",
    "open_log",
    "parse_args",
    "connect",
    "retry",
    "flush_cache",
    "render",
    "validate_input",
    "shutdown",
    "emit_metrics",
    "load_config",
    "spawn_worker",
    "close_socket",
    "hash_password",
    "merge_sorted",
    "notify_users",
    "compress",
    "decode_frame",
    "schedule",
    "rotate_keys",
    "index_rows",
    "warm_up",
    "drain_queue",
    "print_report",
    "check_quota",
];

/// The parts' lines, every statement its own name, so that only braces repeat.
fn name_apart(parts: [Vec<bool>; 6]) -> [Vec<String>; 6] {
    let mut n = 0;
    parts.map(|part| {
        part.into_iter()
            .map(|closer| {
                n += 1;
                match closer {
                    true => "}".to_owned(),
                    false => format!("    {}();", NAMES[n]),
                }
            })
            .collect()
    })
}

/// How an edit repeats the lines around it.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Delete lines between context; the deleted lines end as the context after
    /// them starts (`}` before `}`) when `echo`.
    Delete { echo: bool },
    /// Insert after SEARCH lines that end as SEARCH does when `echo`.
    InsertAfter { echo: bool },
    /// Insert before SEARCH lines that start as the line before SEARCH does when `echo`.
    InsertBefore { echo: bool },
    /// Rewrite lines between context.
    Rewrite,
}

/// A file and an edit of it, as SEARCH and REPLACE lines and SEARCH's first line.
#[derive(Clone, Debug)]
struct Resent {
    file: Vec<String>,
    search: Vec<String>,
    replace: Vec<String>,
    at: usize,
}

fn resent() -> impl Strategy<Value = Resent> {
    let shape = prop_oneof![
        any::<bool>().prop_map(|echo| Shape::Delete { echo }),
        any::<bool>().prop_map(|echo| Shape::InsertAfter { echo }),
        any::<bool>().prop_map(|echo| Shape::InsertBefore { echo }),
        Just(Shape::Rewrite),
    ];
    // The lines away from the edit (first and fifth) are statements alone:
    // braces there may rival SEARCH's place in resemblance, where a replay is
    // refused as a guess (`replay_misplaced`), which this property leaves be.
    let statements = || prop::collection::vec(Just(false), 1..4).boxed();
    let parts = [
        statements(),
        code_run().boxed(),
        code_run().boxed(),
        code_run().boxed(),
        statements(),
        code_run().boxed(),
    ];
    (parts, shape).prop_map(|(parts, shape)| {
        let [head, before, mut gone, after, tail, mut new] = name_apart(parts);
        match shape {
            Shape::Delete { echo: true } => gone.push(after[0].clone()),
            Shape::InsertAfter { echo: true } => new.extend(before.iter().cloned()),
            // Two lines or more would be refused (`duplicates`, SEARCH started late).
            Shape::InsertBefore { echo: true } => new.insert(0, before[before.len() - 1].clone()),
            _ => {}
        }
        let (search, replace, middle) = match shape {
            Shape::Delete { .. } => (
                [&before[..], &gone, &after].concat(),
                [&before[..], &after].concat(),
                [&before[..], &gone, &after].concat(),
            ),
            Shape::InsertAfter { .. } => (
                before.clone(),
                [&before[..], &new].concat(),
                [&before[..], &after].concat(),
            ),
            Shape::InsertBefore { .. } => (
                after.clone(),
                [&new[..], &after].concat(),
                [&before[..], &after].concat(),
            ),
            Shape::Rewrite => (
                [&before[..], &gone, &after].concat(),
                [&before[..], &new, &after].concat(),
                [&before[..], &gone, &after].concat(),
            ),
        };
        let at =
            head.len() + usize::from(matches!(shape, Shape::InsertBefore { .. })) * before.len();
        Resent {
            file: [&head[..], &middle, &tail].concat(),
            search,
            replace,
            at,
        }
    })
}

/// The edit as each format an agent re-sends: a SEARCH/REPLACE block, a
/// unified diff and an apply_patch hunk (lines both sides share as context).
fn formats(e: &Resent) -> [String; 3] {
    let (s, r) = (&e.search, &e.replace);
    let pre = s.iter().zip(r).take_while(|(a, b)| a == b).count();
    let post = s[pre..]
        .iter()
        .rev()
        .zip(r[pre..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut hunk = String::new();
    let mut put = |mark: char, lines: &[String]| {
        for l in lines {
            hunk.push(mark);
            hunk.push_str(l);
            hunk.push('\n');
        }
    };
    put(' ', &s[..pre]);
    put('-', &s[pre..s.len() - post]);
    put('+', &r[pre..r.len() - post]);
    put(' ', &s[s.len() - post..]);
    [
        format!(
            "<<<<<<< SEARCH\n{}=======\n{}>>>>>>> REPLACE\n",
            joined(s),
            joined(r)
        ),
        format!(
            "--- a/f.txt\n+++ b/f.txt\n@@ -{},{} +{},{} @@\n{hunk}",
            e.at + 1,
            s.len(),
            e.at + 1,
            r.len()
        ),
        format!("*** Begin Patch\n*** Update File: f.txt\n@@\n{hunk}*** End Patch\n"),
    ]
}

/// Whether the lines say something (more than a brace).
fn says(lines: &[String]) -> bool {
    lines.iter().any(|l| l.contains("();"))
}

/// Whether REPLACE stands once in `lines` and SEARCH nowhere but inside it.
fn within_replace_alone(lines: &[&[u8]], e: &Resent) -> bool {
    let at = |run: &[String]| -> Vec<usize> {
        let run = str_lines(run);
        (0..=lines.len().saturating_sub(run.len()))
            .filter(|&i| lines[i..].starts_with(&run))
            .collect()
    };
    let [r] = at(&e.replace)[..] else {
        return false;
    };
    at(&e.search)
        .iter()
        .all(|&s| r <= s && s + e.search.len() <= r + e.replace.len())
}

/// The lines SEARCH and REPLACE share at their ends: what places REPLACE where
/// SEARCH was. Braces alone place it nowhere (they end every block).
fn kept(e: &Resent) -> Vec<String> {
    let (s, r) = (&e.search, &e.replace);
    let pre = s.iter().zip(r).take_while(|(a, b)| a == b).count();
    let post = s[pre..]
        .iter()
        .rev()
        .zip(r[pre..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    [&s[..pre], &s[s.len() - post..]].concat()
}

/// Whether REPLACE brings a line SEARCH lacks: finding it proves the edit made.
fn adds_a_line(e: &Resent) -> bool {
    e.replace.iter().any(|l| !e.search.contains(l))
}

/// Whether REPLACE is SEARCH with lines taken out between context on both
/// sides, one of which says something: that context standing together proves
/// the deletion made (a mistyped one leaves the lines it meant between them).
fn deletes_between_context(e: &Resent) -> bool {
    let (s, r) = (&e.search, &e.replace);
    let n = r.len();
    n < s.len()
        && (1..n).any(|k| {
            r[..k] == s[..k] && r[k..] == s[s.len() - (n - k)..] && (says(&r[..k]) || says(&r[k..]))
        })
}

proptest! {
    #![proptest_config(config(800))]

    #[test]
    fn an_edit_with_proof_of_itself_sent_again_is_already_applied(e in resent()) {
        // The proof: a line REPLACE adds, or context standing together that
        // says something; the lines kept must say something to place it.
        prop_assume!(says(&kept(&e)) && (adds_a_line(&e) || deletes_between_context(&e)));
        // An edit the file already reads as is no edit to re-send.
        prop_assume!(count_runs(&e.file, &e.replace) == 0);
        let original = joined(&e.file);
        for payload in formats(&e) {
            let first = apply("f.txt", Some(original.as_bytes()), payload.as_bytes(), &exact_only());
            prop_assert_eq!(first.report.outcome, Outcome::Ok, "{}\n{}", payload, describe(&first));
            let result = first.content.clone();
            prop_assert!(result.is_some(), "{}", describe(&first));
            let result = result.unwrap();
            // A re-sent edit is told from a new one only where its SEARCH is
            // gone, or stands within REPLACE alone: a `}` deleted before a
            // `}` leaves SEARCH in the file, and sent again deletes the next.
            prop_assume!(within_replace_alone(&doc_lines(&result), &e));
            let again = apply("f.txt", Some(&result), payload.as_bytes(), &exact_only());
            prop_assert!(again.content.is_none(), "{}\n{}", payload, describe(&again));
            prop_assert_eq!(again.report.outcome, Outcome::Ok, "{}\n{}", payload, describe(&again));
            prop_assert_eq!(
                again.report.operations[0].outcome,
                OpOutcome::AlreadyApplied,
                "{}\n{}",
                payload,
                describe(&again)
            );
        }
    }
}
