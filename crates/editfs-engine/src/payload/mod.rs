//! What an agent writes: a payload of edit operations, in marker-block or JSON form.
//!
//! Parsing is all-or-nothing like the transaction itself: a payload that cannot be
//! read whole is rejected before any operation runs, and the error names the
//! payload line (or JSON object) that broke and what was expected there.

mod invoke;
mod json;
mod markers;
mod patch;
mod shape;
mod tools;

use std::ops::RangeInclusive;
use std::path::Path;

use regex::bytes::Regex;

use super::ErrorKind;

/// How an operation finds its target.
#[derive(Debug, Clone)]
pub enum Find {
    /// A marker block: whole lines.
    Lines,
    /// A JSON `search`: a literal that may match inside a line.
    Text,
    /// A JSON `search` with `regex`, compiled once at parse time.
    Regex(Regex),
    /// A JSON literal `search` with `ignore_case`, compiled to a regex.
    IgnoreCase(Regex),
}

/// What a patch does to a file as a whole, beside editing its lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileAct {
    /// `*** Delete File:`, or a diff whose new side is `/dev/null`. `listed`: the
    /// patch listed the file's lines (a unified diff does), so any line its hunks
    /// leave behind was unknown to its author, and the file is not removed.
    Delete { listed: bool },
    /// `*** Move to:`, or git's `rename to`: the file, with its edits, takes this
    /// path (as written in the payload).
    MoveTo(String),
}

/// One edit operation, in payload order.
#[derive(Debug, Clone)]
pub struct Operation {
    pub find: Find,
    /// The text to find. For blocks, lines joined with `\n` and ending in `\n` unless empty.
    pub search: String,
    pub replace: String,
    /// The payload line (1-based) where the operation starts, for messages.
    pub payload_line: usize,
    /// `:start_line:` hint: among several matches, the one nearest this line wins.
    pub near: Option<usize>,
    /// JSON `start_line`/`end_line`: matches must lie inside these lines (1-based).
    pub scope: Option<RangeInclusive<usize>>,
    /// Replace every occurrence in scope.
    pub all: bool,
    /// The number of occurrences the agent expects; anything else fails the transaction.
    pub expected: Option<usize>,
    /// Hex SHA-256 the file must have before the transaction.
    pub if_match: Option<String>,
    /// The line of text before a block: in a multi-file payload, perhaps its file's path.
    pub label: Option<String>,
    /// The info string of the fence around a block (```` ```python src/a.py ````):
    /// in a multi-file payload, perhaps its file's path.
    pub fence: Option<String>,
    /// Other readings of a block that holds more than one divider line (a file's
    /// own `=======` lines): each a (SEARCH, REPLACE) split at a later divider. The
    /// engine takes the one reading whose SEARCH matches the file.
    pub splits: Vec<(String, String)>,
    /// The file a tool call names for this operation (a JSON `path` or `file_path`,
    /// an XML `<path>`): it selects the file in a multi-file payload and must be
    /// the edited file otherwise.
    pub path: Option<String>,
    /// The paths a patch's file header names (new side first): sent to one
    /// file's control file, a hunk none of them names is for another file.
    pub patched: Vec<String>,
    /// A patch's removal or move of the whole file: then SEARCH and REPLACE are empty.
    pub act: Option<FileAct>,
    /// A `*** Begin Patch` hunk's `@@ def f():` lines, outermost first (one
    /// `@@ class B:` line and then `@@     def run(self):`, as the format nests
    /// them): the hunk lies after the file's line of the last one's text, found
    /// after the lines of those before it.
    pub anchors: Vec<String>,
    /// A `*** Begin Patch` hunk followed by `*** End of File`: it lies at the end
    /// of the file, so of several matches the last is meant.
    pub end_of_file: bool,
    /// The text editor tool's `insert`: REPLACE goes after this file line (0: at
    /// the top), SEARCH being empty.
    pub insert_after: Option<usize>,
    /// The payload said to write its file even if it no longer parses (JSON
    /// `"syntax_check": "off"`, a `:syntax_check: off` line in a block).
    pub syntax_off: bool,
    /// The payload said its REPLACE lines that read as placeholders are
    /// content (JSON `"placeholder_check": "off"`, a `:placeholder_check: off`
    /// line in a block).
    pub placeholders_kept: bool,
}

impl Operation {
    fn new(find: Find, search: String, replace: String, payload_line: usize) -> Operation {
        Operation {
            find,
            search,
            replace,
            payload_line,
            near: None,
            scope: None,
            all: false,
            expected: None,
            if_match: None,
            label: None,
            fence: None,
            splits: Vec::new(),
            path: None,
            patched: Vec::new(),
            act: None,
            anchors: Vec::new(),
            end_of_file: false,
            insert_after: None,
            syntax_off: false,
            placeholders_kept: false,
        }
    }
}

/// A parsed payload: its operations and notes on what was ignored.
#[derive(Debug, Default)]
pub struct Payload {
    pub operations: Vec<Operation>,
    pub notes: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PayloadError {
    #[error(
        "the payload reached {size} bytes, over the limit of {limit} bytes (--max-content-size)"
    )]
    TooLarge { size: usize, limit: usize },
    #[error("the payload is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 { offset: usize },
    #[error("the payload holds no edit operation")]
    Empty,
    #[error("payload line {line}: {found}; expected {expected}")]
    Structure {
        line: usize,
        found: String,
        expected: String,
    },
    /// A patch that cannot be read as one (its hint explains patches, not blocks).
    #[error("payload line {line}: {found}; expected {expected}")]
    Patch {
        line: usize,
        found: String,
        expected: String,
    },
    #[error("payload line {line}, column {column}: invalid JSON: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("JSON operation {index}: {message}")]
    Field { index: usize, message: String },
    #[error("the payload holds no edit operation: it looks like {looks_like}")]
    Shape { looks_like: String, hint: String },
    #[error("the {by} names `{named}`, but it was sent to edit {file}")]
    OtherFile {
        /// What named it: a tool `call` or a `patch`.
        by: &'static str,
        named: String,
        file: String,
    },
    #[error(
        "payload line {line}: the patch {what}, which the control file of one file does not do"
    )]
    WholeFile { line: usize, what: String },
}

impl PayloadError {
    /// The report's error kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            PayloadError::TooLarge { .. } => ErrorKind::TooLarge,
            PayloadError::OtherFile { .. } => ErrorKind::WrongFile,
            PayloadError::WholeFile { .. } => ErrorKind::MultiFile,
            _ => ErrorKind::Malformed,
        }
    }

    /// What the agent should do about it.
    pub fn hint(&self) -> String {
        match self {
            PayloadError::TooLarge { .. } => {
                "split the edit into several smaller transactions".into()
            }
            PayloadError::Json { .. } | PayloadError::Field { .. } => JSON_SHAPE.into(),
            PayloadError::Patch { .. } => PATCH_SHAPE.into(),
            PayloadError::Shape { hint, .. } => hint.clone(),
            PayloadError::OtherFile { named, .. } => format!(
                "send it to the edit control file of `{named}` (or to .editfs/edit, which edits the files a payload names), or correct the path"
            ),
            PayloadError::WholeFile { .. } => "send the whole patch to .editfs/edit (or `editfs apply --multi ROOT`): there it runs as one all-or-nothing transaction that keeps each removed file's content, so `editfs undo` brings it back".into(),
            _ => BLOCK_SHAPE.into(),
        }
    }
}

const BLOCK_SHAPE: &str = "a block is a line `<<<<<<< SEARCH` (or `------- SEARCH`), the exact \
lines to find, a line `=======`, the lines to put in their place, and a line `>>>>>>> REPLACE` (or \
`+++++++ REPLACE`), each marker alone on its line";
const PATCH_SHAPE: &str = "a unified diff is read as `git diff` prints it: `--- a/FILE`, \
`+++ b/FILE`, then hunks, each a header `@@ -START,COUNT +START,COUNT @@` (or `@@ ... @@`, which \
counts nothing) and its lines, each starting with a space (context), `-` (removed) or `+` (added); \
a `*** Begin Patch` patch names each file on a line `*** Update File: FILE`, starts each hunk with \
`@@`, and ends with `*** End Patch`";
const JSON_SHAPE: &str = "JSON operations look like {\"search\": \"old text\", \"replace\": \"new \
text\"}, one object or an array of them";

/// A payload as a reader received it. Readers stop a little past the limit, so a
/// huge payload costs no memory; such a payload arrives cut short, together with
/// the size it really had, which the `too_large` report states.
#[derive(Clone, Copy, Debug)]
pub struct Received<'a> {
    pub bytes: &'a [u8],
    /// The payload's real size in bytes (at least `bytes.len()`).
    pub size: usize,
}

impl<'a> Received<'a> {
    /// The first bytes of a payload of `size` bytes that was not read to its end.
    pub fn cut(bytes: &'a [u8], size: usize) -> Received<'a> {
        Received {
            bytes,
            size: size.max(bytes.len()),
        }
    }
}

impl<'a> From<&'a [u8]> for Received<'a> {
    fn from(bytes: &'a [u8]) -> Received<'a> {
        Received {
            bytes,
            size: bytes.len(),
        }
    }
}

impl<'a> From<&'a Vec<u8>> for Received<'a> {
    fn from(bytes: &'a Vec<u8>) -> Received<'a> {
        Received::from(bytes.as_slice())
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Received<'a> {
    fn from(bytes: &'a [u8; N]) -> Received<'a> {
        Received::from(bytes.as_slice())
    }
}

/// Parses a payload, detecting its form: an edit tool's XML call, JSON when it
/// starts with `{` or `[`, a patch, marker blocks otherwise.
pub fn parse<'a>(received: impl Into<Received<'a>>, limit: usize) -> Result<Payload, PayloadError> {
    let Received { bytes, size } = received.into();
    if size > limit || bytes.len() > limit {
        return Err(PayloadError::TooLarge { size, limit });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| PayloadError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let payload = if let Some(calls) = tools::parse_xml(text) {
        calls?
    } else if let Some(calls) = invoke::parse_invoke(text) {
        calls?
    } else if let Some(json) = fenced_json(text) {
        let mut payload = json::parse(json)?;
        payload
            .notes
            .push("read the JSON inside a ``` fence".into());
        payload
    } else if looks_like_json(text) {
        match json::parse(text) {
            Ok(p) => p,
            // A payload that opens with `{` but holds marker blocks is prose plus blocks.
            Err(e) if !markers::has_blocks(text) => return Err(e),
            Err(_) => markers::parse(text)?,
        }
    } else if !markers::has_blocks(text) && patch::detect(text) {
        patch::parse(text)?
    } else {
        markers::parse(text).map_err(|e| shape::escaped(text).unwrap_or(e))?
    };
    if payload.operations.is_empty() {
        return Err(shape::diagnose(text).unwrap_or(PayloadError::Empty));
    }
    Ok(payload)
}

/// Reads a single-file payload for the file `name`: a path a tool call names
/// must be that file, by `names` (the caller, who knows the file system, decides).
/// A patch that removes or moves a file is refused: one file's control file
/// edits that file, and a removal sent to it is more likely a patch sent to the
/// wrong place than a wish to lose the file.
pub fn parse_single<'a>(
    received: impl Into<Received<'a>>,
    limit: usize,
    name: &str,
    names: &dyn Fn(&str) -> bool,
) -> Result<Payload, PayloadError> {
    let payload = parse(received, limit)?;
    if let Some(op) = payload.operations.iter().find(|o| o.act.is_some()) {
        let what = match &op.act {
            Some(FileAct::MoveTo(to)) => format!("moves a file to {to}"),
            _ => "deletes a file".to_owned(),
        };
        return Err(PayloadError::WholeFile {
            line: op.payload_line,
            what,
        });
    }
    let other_file = |by, named: &String| PayloadError::OtherFile {
        by,
        named: named.clone(),
        file: name.to_owned(),
    };
    for op in &payload.operations {
        if let Some(p) = op.path.as_ref().filter(|p| !names(p)) {
            return Err(other_file("call", p));
        }

        // Absolute header paths are not checked: `diff -u` prints them for
        // temporary copies, whose names say nothing of the file meant.
        if let Some(relative) = op.patched.iter().find(|p| !p.starts_with('/'))
            && !op.patched.iter().any(|p| patch_names(p, names))
        {
            return Err(other_file("patch", relative));
        }
        if op.patched.is_empty()
            && op.path.is_none()
            && let Some(p) = op.label.as_deref().and_then(shaped_path)
            && !names(p)
            && file_name(p) != file_name(name)
        {
            return Err(other_file("path line before the block", &p.to_owned()));
        }
    }
    Ok(payload)
}

/// The last component of a path.
fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The path a line of text before a block names by its shape alone: no spaces
/// and a file name with an extension (`src/a.py`, `` `a.py` ``, `**a.py**:`), as
/// Aider writes a file's path before its blocks. Prose ("Done.") has none.
/// Sent to one file's control file, such a line is checked by its file name
/// only: a root the agent sees elsewhere may prefix other directories.
fn shaped_path(label: &str) -> Option<&str> {
    let (label, heading) = strip_heading(label);
    let t = strip_decoration(label);
    let name = t.rsplit('/').next().unwrap_or(t);
    let extension = name
        .trim_start_matches('.')
        .rsplit_once('.')
        .map(|(_, e)| e);
    let shaped = !heading
        && !t.contains(char::is_whitespace)
        && extension.is_some_and(|e| !e.is_empty() && e.chars().all(char::is_alphanumeric));
    shaped.then_some(t)
}

/// Whether a patch header's path names the file: as written, or with its first
/// directory dropped, as `patch -p1` reads `diff -ru old/ new/` (and `git diff
/// --no-index a/ b/`, whose `a/` git prefixes again).
fn patch_names(path: &str, names: &dyn Fn(&str) -> bool) -> bool {
    names(path)
        || path
            .split_once('/')
            .is_some_and(|(_, rest)| !rest.is_empty() && names(rest))
}

/// What a caller knows of the files beneath its root, so the engine, which
/// touches no file, can tell which line of a multi-file payload names one.
pub trait Tree {
    /// The path beneath the root that `written` names: relative to the root, or
    /// absolute inside it (or inside the mount that mirrors it). `Err`: it
    /// names nothing inside.
    fn locate(&self, written: &str) -> Result<String, Outside>;
    /// What is at `rel` beneath the root, if anything.
    fn entry(&self, rel: &str) -> Option<Entry>;
}

/// A path a payload wrote that lies outside the root (`Tree::locate`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{written} is outside the project: give the path relative to its root")]
pub struct Outside {
    pub written: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    File,
    Dir,
}

/// Each file's path and its operations.
pub type Files = Vec<(String, Payload)>;

/// The operations of each file of a multi-file payload, in the order the files
/// first appear, and the notes. A block's file is the one its tool call names
/// (JSON `path`, XML `<path>`), else the one the line of text before it names,
/// else the previous block's.
pub fn parse_multi<'a>(
    received: impl Into<Received<'a>>,
    limit: usize,
    tree: &dyn Tree,
) -> Result<(Files, Vec<String>), PayloadError> {
    let payload = parse(received, limit)?;
    let mut files: Vec<(String, Payload)> = Vec::new();
    let mut current: Option<String> = None;
    for op in payload.operations {
        let creates = op.search.is_empty() && op.insert_after.is_none();
        let named = match &op.path {
            Some(p) => Some(tree.locate(p).unwrap_or_else(|_| p.clone())),
            None => {
                let fence = |creates| {
                    op.fence
                        .as_deref()
                        .and_then(|f| fence_path(f, creates, tree))
                };
                let label = |creates| {
                    op.label
                        .as_deref()
                        .and_then(|l| path_line(l, creates, tree))
                };
                // A line with spaces that names no file yet is the weakest
                // sign: prose ("Here is the new file:") often stands there.
                fence(false)
                    .or_else(|| label(false))
                    .or_else(|| fence(creates))
                    .or_else(|| label(creates))
            }
        };
        if named.is_some() {
            current = named;
        }
        let Some(path) = current.clone() else {
            return Err(PayloadError::Structure {
                line: op.payload_line,
                found: "a block with no file path before it".into(),
                expected: "the file's path, relative to the root, alone on a line before its blocks (or \"path\" in JSON)".into(),
            });
        };
        match files.iter_mut().find(|(p, _)| *p == path) {
            Some((_, p)) => p.operations.push(op),
            None => files.push((
                path,
                Payload {
                    operations: vec![op],
                    notes: Vec::new(),
                },
            )),
        }
    }
    let notes = payload
        .notes
        .into_iter()
        .filter(|n| !n.starts_with("ignored "))
        .collect();
    Ok((files, notes))
}

/// The file a line of text before a block names, as agents write it: `src/a.py`,
/// `` `src/a.py` ``, `**src/a.py**`, `"my notes.md"`, `src/a.py:`, `File: src/a.py`,
/// `### src/a.py`. A line with spaces, or a Markdown heading, is a path only when
/// it names an existing file, or a file the block creates in an existing
/// directory: otherwise it is prose or a title. Another line without spaces is
/// taken as a path by its shape, so a mistyped one is reported as a missing file
/// rather than as a block without a path.
fn path_line(label: &str, creates: bool, tree: &dyn Tree) -> Option<String> {
    let (label, heading) = strip_heading(label);
    let t = strip_decoration(label);
    let tag = t.starts_with('<') && t.ends_with('>');
    if t.is_empty() || t.starts_with('#') || tag {
        return None;
    }
    // `...` between two blocks (Aider's "and so on") is no file name.
    let by_shape =
        !heading && !t.contains(char::is_whitespace) && t.contains(char::is_alphanumeric);
    let Ok(rel) = tree.locate(t) else {
        return by_shape.then(|| t.to_owned());
    };
    let exists = tree.entry(&rel) == Some(Entry::File);
    let new_file = creates && file_like(&rel) && parent_is_dir(&rel, tree) && !sentence(label, t);
    (exists || by_shape || new_file).then_some(rel)
}

/// Whether a line that would name a new file reads as a sentence instead: it has
/// spaces, no directory, and no quotes or backticks around all of it. "Here is the
/// change to main.py:" ends in a file name, but a file named by the whole sentence
/// must never be written; `"my notes.md"` or `docs/my notes.md` still name one.
fn sentence(label: &str, name: &str) -> bool {
    let quoted = label
        .trim()
        .trim_end_matches(':')
        .trim_start_matches('*')
        .starts_with(['`', '"', '\'']);
    name.contains(char::is_whitespace) && !name.contains('/') && !quoted
}

/// Whether a name that is no file yet looks like one: it has a directory or an
/// extension, as a language tag or a sentence has not.
fn file_like(rel: &str) -> bool {
    rel.contains('/') || rel.trim_start_matches('.').contains('.')
}

/// The file a fence's info string names, as some agents title a file's blocks:
/// ```` ```python src/a.py ````, ```` ```rust:src/a.rs ````, ```` ```src/a.ts ````,
/// ```` ```python title="src/a.py" ````. Only a word naming an existing file, or,
/// when `creates`, a file name with a directory or an extension (its directories
/// are made) counts: a language tag (```` ```text ````) is never read as a path.
/// A path line before the fence is taken over a file the fence would create.
fn fence_path(info: &str, creates: bool, tree: &dyn Tree) -> Option<String> {
    let words = info.split_whitespace().flat_map(|w| {
        let value = w.split_once('=').map_or(w, |(_, v)| v);
        [Some(value), value.split_once(':').map(|(_, p)| p)]
    });
    words
        .flatten()
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter(|w| !w.is_empty())
        .filter_map(|w| tree.locate(w).ok())
        .filter(|rel| tree.entry(rel) == Some(Entry::File) || (creates && file_like(rel)))
        .last()
}

/// Whether the directory `rel` goes into exists beneath the root.
fn parent_is_dir(rel: &str, tree: &dyn Tree) -> bool {
    match Path::new(rel).parent() {
        Some(p) if !p.as_os_str().is_empty() => {
            tree.entry(&p.to_string_lossy()) == Some(Entry::Dir)
        }
        _ => true,
    }
}

/// The text of a Markdown heading (`### src/a.py`), and whether it was one.
fn strip_heading(label: &str) -> (&str, bool) {
    let t = label.trim_start();
    let text = t.trim_start_matches('#');
    let level = t.len() - text.len();
    match (1..=6).contains(&level) && text.starts_with(' ') {
        true => (text, true),
        false => (label, false),
    }
}

fn strip_decoration(label: &str) -> &str {
    let t = label.trim();
    let t = ["File:", "Path:", "Filename:", "file:", "path:", "filename:"]
        .iter()
        .find_map(|p| t.strip_prefix(p))
        .unwrap_or(t);
    let decoration = |c| c == '`' || c == '*' || c == '"' || c == '\'';
    t.trim()
        .trim_end_matches(':')
        .trim_matches(decoration)
        .trim_end_matches(':')
        .trim()
}

/// The JSON a payload holds when all of it is one fenced block (```` ```json ````
/// or a bare ```` ``` ````), as models often write it.
fn fenced_json(text: &str) -> Option<&str> {
    let t = text.trim();
    let (open, rest) = t.split_once('\n')?;
    let tag = open.trim_end().strip_prefix("```")?;
    if !(tag.is_empty() || tag.eq_ignore_ascii_case("json")) {
        return None;
    }
    let inside = rest.trim_end().strip_suffix("```")?;
    (looks_like_json(inside) && !inside.contains("\n```")).then_some(inside)
}

fn looks_like_json(text: &str) -> bool {
    matches!(text.trim_start().chars().next(), Some('{' | '['))
}

/// Splits text into lines the way blocks see them: `\n` separated, a trailing `\r`
/// dropped, no empty last line for text that ends with a newline.
pub fn text_lines(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    body.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project holding `files` (and their directories), rooted at `/p`.
    struct Fake(&'static [&'static str]);

    impl Tree for Fake {
        fn locate(&self, written: &str) -> Result<String, Outside> {
            match written.strip_prefix('/') {
                Some(abs) => abs.strip_prefix("p/").map(str::to_owned).ok_or(Outside {
                    written: written.to_owned(),
                }),
                None => Ok(written.trim_start_matches("./").to_owned()),
            }
        }

        fn entry(&self, rel: &str) -> Option<Entry> {
            let dir = |f: &&str| f.starts_with(&format!("{rel}/"));
            match () {
                _ if self.0.contains(&rel) => Some(Entry::File),
                _ if self.0.iter().any(dir) => Some(Entry::Dir),
                _ => None,
            }
        }
    }

    fn shape(files: &Files) -> Vec<(&str, usize)> {
        files
            .iter()
            .map(|(p, pl)| (p.as_str(), pl.operations.len()))
            .collect()
    }

    #[test]
    fn over_the_limit_is_too_large() {
        let err = parse(&[b'x'; 11], 10).unwrap_err();
        assert_eq!(err.kind(), "too_large");
    }

    #[test]
    fn a_cut_payload_reports_its_real_size() {
        let err = parse(Received::cut(&[b'x'; 11], 147_456), 10).unwrap_err();
        assert_eq!(
            err,
            PayloadError::TooLarge {
                size: 147_456,
                limit: 10
            }
        );
        // A writer through the mount stops at the write that passes the limit:
        // the size is what arrived, a lower bound, never claimed as the whole.
        assert!(
            err.to_string()
                .contains("the payload reached 147456 bytes, over the limit of 10")
        );
    }

    #[test]
    fn binary_payload_is_rejected_with_its_offset() {
        let err = parse(b"ab\xff\xfe", 100).unwrap_err();
        assert_eq!(err, PayloadError::NotUtf8 { offset: 2 });
    }

    #[test]
    fn blank_payload_holds_nothing() {
        assert_eq!(parse(b"  \n", 100).unwrap_err(), PayloadError::Empty);
    }

    #[test]
    fn brace_prose_with_blocks_is_read_as_blocks() {
        let p = parse(
            b"{ a note }\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n",
            1000,
        )
        .unwrap();
        assert_eq!(p.operations.len(), 1);
    }

    #[test]
    fn json_in_a_fence_is_read_as_json() {
        let text = "```json\n{\"search\": \"a\", \"replace\": \"b\"}\n```\n";
        let p = parse(text.as_bytes(), 1000).unwrap();
        assert_eq!(p.operations.len(), 1);
        assert_eq!(
            (
                p.operations[0].search.as_str(),
                p.operations[0].replace.as_str()
            ),
            ("a", "b")
        );
        assert!(p.notes.iter().any(|n| n.contains("fence")), "{:?}", p.notes);
    }

    #[test]
    fn multi_file_payloads_group_blocks_by_path() {
        let text = "src/a.py\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n**lib/b.rs**:\n```rust\n<<<<<<< SEARCH\ne\n=======\nf\n>>>>>>> REPLACE\n```\n";
        let (files, _) = parse_multi(text.as_bytes(), 10_000, &Fake(&[])).unwrap();
        assert_eq!(shape(&files), [("src/a.py", 2), ("lib/b.rs", 1)]);
        let json = r#"[{"path": "a", "search": "x", "replace": "y"}, {"search": "z", "replace": "w"}, {"file_path": "b", "search": "1"}]"#;
        let (files, _) = parse_multi(json.as_bytes(), 10_000, &Fake(&[])).unwrap();
        assert_eq!(shape(&files), [("a", 2), ("b", 1)]);
    }

    #[test]
    fn path_lines_with_spaces_and_unicode_name_existing_files() {
        let tree = Fake(&["a b/c.py", "docs/résumé notes.md", "src/x.rs"]);
        let block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        let text = format!(
            "a b/c.py\n{block}`docs/résumé notes.md`\n{block}\"a b/c.py\"\n{block}Now the other file:\n{block}"
        );
        let (files, _) = parse_multi(text.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(
            shape(&files),
            [("a b/c.py", 3), ("docs/résumé notes.md", 1)]
        );
        let json = r#"{"path": "a b/c.py", "search": "x = 1", "replace": "x = 2"}"#;
        let (files, _) = parse_multi(json.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(shape(&files), [("a b/c.py", 1)]);
    }

    #[test]
    fn a_markdown_heading_or_filename_line_names_an_existing_file() {
        let tree = Fake(&["src/a.py", "lib/b.rs"]);
        let block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        let text = format!(
            "### src/a.py\n```python\n{block}```\n## Fix the loop\n{block}# Filename: lib/b.rs\n{block}"
        );
        let (files, _) = parse_multi(text.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(shape(&files), [("src/a.py", 2), ("lib/b.rs", 1)]);
        // A heading that names no file is a title, not a path.
        let title = format!("## Changes\n{block}");
        assert!(parse_multi(title.as_bytes(), 10_000, &tree).is_err());
    }

    #[test]
    fn aiders_tag_fences_are_fences_in_a_multi_file_payload() {
        let tree = Fake(&["py/a.py", "docs/b.md"]);
        let block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        for (open, close) in [
            ("<source>python", "</source>"),
            ("<code>", "</code>"),
            ("<pre>markdown", "</pre>"),
            ("<sourcecode>python", "</sourcecode>"),
        ] {
            let text =
                format!("py/a.py\n{open}\n{block}{close}\n\ndocs/b.md\n{open}\n{block}{close}\n");
            let (files, notes) = parse_multi(text.as_bytes(), 10_000, &tree).unwrap();
            assert_eq!(shape(&files), [("py/a.py", 1), ("docs/b.md", 1)], "{open}");
            assert!(notes.is_empty(), "{open}: {notes:?}");
        }
    }

    #[test]
    fn a_path_in_a_fences_info_string_names_the_file_of_its_blocks() {
        let tree = Fake(&["py/textwrap.py", "lib/b.rs", "src/c.ts"]);
        let block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        let create = "<<<<<<< SEARCH\n=======\nnew\n>>>>>>> REPLACE\n";
        let text = format!(
            "```python py/textwrap.py\n{block}```\n```rust:lib/b.rs\n{block}```\n```src/c.ts\n{block}```\n```python title=\"py/new.py\"\n{create}```\n"
        );
        let (files, notes) = parse_multi(text.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(
            shape(&files),
            [
                ("py/textwrap.py", 1),
                ("lib/b.rs", 1),
                ("src/c.ts", 1),
                ("py/new.py", 1)
            ]
        );
        assert!(notes.is_empty(), "{notes:?}");
        // A fence naming no file leaves the path line before it in force, and a
        // language tag is never read as a path.
        let kept = format!("lib/b.rs\n```python\n{block}```\n```rust extra words\n{block}```\n");
        let (files, _) = parse_multi(kept.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(shape(&files), [("lib/b.rs", 2)]);
        let no_path = format!("```rust\n{block}```\n");
        assert!(parse_multi(no_path.as_bytes(), 10_000, &tree).is_err());
        // A block that creates a file keeps the path line before a tagged fence:
        // the tag names no file to create.
        let create_after_tag = format!("new.txt\n```text\n{create}```\n");
        let (files, _) = parse_multi(create_after_tag.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(shape(&files), [("new.txt", 1)]);
        // Prose before a fence that names a new file in a new directory is no path.
        let prose =
            format!("Here are the new files:\n\n```python newpkg/deep/mod.py\n{create}```\n");
        let (files, _) = parse_multi(prose.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(shape(&files), [("newpkg/deep/mod.py", 1)]);
    }

    #[test]
    fn an_ellipsis_between_two_blocks_keeps_the_file_of_the_first() {
        let block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        let text = format!("```text\nfoo.txt\n{block}\n...\n\n{block}```\n");
        let (files, _) = parse_multi(text.as_bytes(), 10_000, &Fake(&["foo.txt"])).unwrap();
        assert_eq!(shape(&files), [("foo.txt", 2)]);
    }

    #[test]
    fn a_path_line_with_spaces_may_name_a_file_its_block_creates() {
        let tree = Fake(&["a b/c.py"]);
        let create = "<<<<<<< SEARCH\n=======\nnew\n>>>>>>> REPLACE\n";
        let text = format!("a b/new file.txt\n{create}");
        let (files, _) = parse_multi(text.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(shape(&files), [("a b/new file.txt", 1)]);
        let no_dir = format!("no such dir/new file.txt\n{create}");
        assert!(parse_multi(no_dir.as_bytes(), 10_000, &tree).is_err());
        // A sentence before a block that creates a file names no file, even one
        // ending in a file name; quotes make a name with spaces one.
        for prose in [
            "Here are the new files:",
            "Here is the change to main.py:",
            "Here is the new module, util.py",
            "Add this to `tools.py`:",
        ] {
            let text = format!("{prose}\n{create}");
            assert!(
                parse_multi(text.as_bytes(), 10_000, &tree).is_err(),
                "{prose}"
            );
        }
        let quoted = format!("`my notes.md`\n{create}");
        let (files, _) = parse_multi(quoted.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(shape(&files), [("my notes.md", 1)]);
    }

    #[test]
    fn absolute_paths_inside_the_root_become_relative() {
        let tree = Fake(&["src/x.rs"]);
        let block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        let text = format!("/p/src/x.rs\n{block}/etc/passwd\n{block}");
        let (files, _) = parse_multi(text.as_bytes(), 10_000, &tree).unwrap();
        assert_eq!(shape(&files), [("src/x.rs", 1), ("/etc/passwd", 1)]);
    }

    #[test]
    fn a_block_without_a_path_is_rejected_in_a_multi_file_payload() {
        let block = b"<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        let err = parse_multi(block, 1000, &Fake(&[])).unwrap_err();
        assert!(
            matches!(err, PayloadError::Structure { line: 1, .. }),
            "{err:?}"
        );
        let prose = [&b"Here is the change:\n"[..], block].concat();
        assert!(parse_multi(&prose, 1000, &Fake(&[])).is_err());
    }

    /// Pieces of every form a payload may take, shuffled into broken payloads.
    const PIECES: &[&str] = &[
        "<<<<<<< SEARCH\n",
        "------- SEARCH\n",
        "=======\n",
        ">>>>>>> REPLACE\n",
        "+++++++ REPLACE\n",
        "<replace_in_file>",
        "</replace_in_file>",
        "<path>",
        "</path>",
        "<diff>",
        "</diff>",
        "<search_and_replace>",
        "<search>",
        "</search>",
        "<replace>",
        "</replace>",
        "<use_regex>true</use_regex>",
        "<start_line>",
        "</start_line>",
        "*** Begin Patch\n",
        "*** Update File: a\n",
        "*** End Patch\n",
        "--- a/x\n",
        "+++ b/x\n",
        "@@ -1,2 +1 @@\n",
        "@@ -0,0 +1 @@\n",
        " ctx\n",
        "-old\n",
        "+new\n",
        "\\ No newline at end of file\n",
        "*** Delete File: a\n",
        "*** Move to: b\n",
        "@@ def f():\n",
        "diff --git a/x b/x\n",
        "diff --git a/é b/é\n",
        "rename from x\n",
        "rename to y\n",
        "deleted file mode 100644\n",
        "new file mode 100644\n",
        "+++ /dev/null\n",
        "```\n",
        "{\"path\": \"a b\", ",
        "\"content\": \"",
        "\"}",
        "$<n>",
        "$&",
        "(?<n>x)",
        "\\n",
        "&lt;",
        "é",
        "\n",
        "x",
    ];

    proptest::proptest! {
        #[test]
        fn no_mix_of_payload_forms_panics(picks in proptest::collection::vec(0..PIECES.len(), 0..40)) {
            let text: String = picks.iter().map(|&i| PIECES[i]).collect();
            let _ = parse(text.as_bytes(), 1 << 20);
            let _ = parse_multi(text.as_bytes(), 1 << 20, &Fake(&["a", "a b"]));
        }
    }

    /// Whether a written path names `src/lib.rs` as seen from the root or `src/`.
    fn is_lib(p: &str) -> bool {
        ["src/lib.rs", "lib.rs"].contains(&p)
    }

    #[test]
    fn a_patch_for_another_file_is_refused_by_one_files_control_file() {
        let hunk = "@@ -1 +1 @@\n-a\n+b\n";
        let diff = |old: &str, new: &str| format!("--- {old}\n+++ {new}\n{hunk}");
        let single = |text: &str| parse_single(text.as_bytes(), 10_000, "src/lib.rs", &is_lib);
        let err = single(&diff("a/src/other.rs", "b/src/other.rs")).unwrap_err();
        assert_eq!(err.kind(), "wrong_file");
        assert_eq!(
            err.to_string(),
            "the patch names `src/other.rs`, but it was sent to edit src/lib.rs"
        );
        let begin = "*** Begin Patch\n*** Update File: OTHER.md\n@@\n-a\n+b\n*** End Patch\n";
        assert_eq!(single(begin).unwrap_err().kind(), "wrong_file");
        for named in [
            diff("a/src/lib.rs", "b/src/lib.rs"),
            diff("lib.rs.orig", "lib.rs"),
            diff("old/src/lib.rs", "new/src/lib.rs"),
            diff("a/a/src/lib.rs", "b/b/src/lib.rs"),
            begin.replace("OTHER.md", "src/lib.rs"),
            diff("/tmp/tmpa1b2/orig", "/tmp/tmpa1b2/new"),
        ] {
            assert!(single(&named).is_ok(), "{named}");
        }
    }

    #[test]
    fn a_path_line_naming_another_file_is_refused_by_one_files_control_file() {
        // Aider's form: the path alone before the (fenced) block. Sent to the
        // wrong file's control file, a SEARCH both files share would edit it.
        let block = "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n";
        let single = |text: &str| parse_single(text.as_bytes(), 10_000, "src/lib.rs", &is_lib);
        for other in [
            format!("src/other.rs\n```rust\n{block}```\n"),
            format!("`src/other.rs`\n{block}"),
            format!("**src/other.rs**:\n{block}"),
            format!("{block}\nsrc/other.rs\n{block}"),
        ] {
            let err = single(&other).unwrap_err();
            assert_eq!(err.kind(), "wrong_file", "{other}");
            assert!(err.to_string().contains("`src/other.rs`"), "{err}");
        }
        for fine in [
            format!("src/lib.rs\n```rust\n{block}```\n"),
            format!("lib.rs\n{block}"),
            format!("Done.\n{block}"),
            format!("Here is the fix for src/other.rs:\n{block}"),
            format!("src/lib.rs:10\n{block}"),
            format!("...\n{block}"),
            format!("repo/src/lib.rs\n{block}"),
        ] {
            assert!(single(&fine).is_ok(), "{fine}");
        }
    }

    #[test]
    fn text_lines_drop_cr_and_final_newline() {
        assert_eq!(text_lines("a\r\nb\n"), ["a", "b"]);
        assert_eq!(text_lines("a\n\n"), ["a", ""]);
        assert!(text_lines("").is_empty());
    }
}
