//! The interpreter: one transaction's state, and each operation run through
//! the stages mod.rs draws (its shape refused or let through, located,
//! rewritten), with what it did or why it failed.

use std::cell::OnceCell;

use super::budget::{self, Budget};
use super::hints::{Moved, moved_note};
use super::payload::{FileAct, Find, Operation, text_lines};
use super::report::{Closest, ErrorKind, ErrorReport, OpOutcome, OpReport};
use super::text_match::same_text;
use super::tolerant::Tier;
use super::working_text::Doc;
use super::{Options, line_match};

/// Why one operation did not apply.
pub(super) struct Failure {
    pub(super) kind: ErrorKind,
    pub(super) message: String,
    pub(super) hint: Option<String>,
    pub(super) closest: Option<Closest>,
}

impl Failure {
    pub(super) fn new(
        kind: ErrorKind,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> Failure {
        Failure {
            kind,
            message: message.into(),
            hint: Some(hint.into()),
            closest: None,
        }
    }
}

/// What an operation did, short of failing.
pub(super) struct Done {
    pub(super) outcome: OpOutcome,
    pub(super) strategy: &'static str,
    pub(super) lines: Option<[usize; 2]>,
    pub(super) warnings: Vec<String>,
}

impl Done {
    pub(super) fn applied(
        strategy: &'static str,
        lines: Option<[usize; 2]>,
        warnings: Vec<String>,
    ) -> Done {
        Done {
            outcome: OpOutcome::Applied,
            strategy,
            lines,
            warnings,
        }
    }

    /// A replay: nothing to do, and said so.
    pub(super) fn replayed(lines: [usize; 2], why: &str) -> Done {
        Done {
            outcome: OpOutcome::AlreadyApplied,
            strategy: "replay",
            lines: Some(lines),
            warnings: vec![format!("already applied: {why}; nothing changed")],
        }
    }
}

pub(super) struct Transaction<'a, 'o> {
    pub(super) doc: Doc<'a>,
    /// Whether `doc` still records its changes against the original (no byte-level rewrite yet).
    pub(super) tracked: bool,
    /// The file's bytes before the transaction (without a BOM).
    pub(super) body: &'a [u8],
    /// Whether `body` is UTF-8, checked only when a rule depends on it: an
    /// exact match does not.
    pub(super) utf8: OnceCell<bool>,
    /// Whether `body` holds an HTML entity, looked for once: every operation
    /// whose REPLACE holds one asks (`refuse_entity_replace`).
    pub(super) entities: OnceCell<bool>,
    /// Whether `body`'s lines start with a tab, and with a space (`indented_with`).
    pub(super) indents: OnceCell<(bool, bool)>,
    pub(super) opts: &'o Options,
    /// The work the transaction may still do (see budget.rs).
    pub(super) budget: &'o Budget,
    /// Whether a failing operation is diagnosed (closest region, differences):
    /// not when an operation is run again only to see where it matches.
    pub(super) diagnosing: bool,
    /// Whether the file existed before the transaction.
    pub(super) exists: bool,
    /// A removal or move an operation asked for, and that operation's index.
    pub(super) act: Option<(FileAct, usize)>,
    /// What the operations run so far did to line numbers (see `Moved`).
    pub(super) moved: Vec<Moved>,
    /// Whether the file is prose (Markdown and the like), whose own fence
    /// lines an edit may add, close or cut across.
    pub(super) prose: bool,
    /// Whether the file is markup, where an edit may write HTML entities.
    pub(super) markup: bool,
}

/// Whether a file of this name is prose, where a Markdown fence line is
/// content: a changelog's entry, a block closed by a later edit.
fn prose(name: &str) -> bool {
    let ext = std::path::Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    matches!(
        ext.as_deref(),
        Some("md" | "markdown" | "mdx" | "rst" | "adoc" | "org")
    )
}

/// Whether a file of this name is markup (or prose), where an HTML entity is
/// text an edit may mean to write (`Tom &amp; Jerry`), not an escape.
fn markup(name: &str) -> bool {
    let ext = std::path::Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    prose(name)
        || matches!(
            ext.as_deref(),
            Some(
                "html"
                    | "htm"
                    | "xhtml"
                    | "xml"
                    | "svg"
                    | "xsl"
                    | "xslt"
                    | "vue"
                    | "svelte"
                    | "astro"
                    | "jsx"
                    | "tsx"
                    | "php"
                    | "erb"
                    | "ejs"
                    | "hbs"
                    | "j2"
                    | "jinja"
                    | "twig"
            )
        )
}

impl<'a, 'o> Transaction<'a, 'o> {
    /// A transaction on the file `name` whose bytes (without a BOM) are
    /// `body`, read into `doc`; `exists`: whether the file did before it.
    pub(super) fn new(
        name: &str,
        doc: Doc<'a>,
        body: &'a [u8],
        exists: bool,
        opts: &'o Options,
        budget: &'o Budget,
    ) -> Self {
        Transaction {
            doc,
            tracked: true,
            body,
            utf8: OnceCell::new(),
            entities: OnceCell::new(),
            indents: OnceCell::new(),
            opts,
            budget,
            diagnosing: true,
            exists,
            act: None,
            moved: Vec::new(),
            prose: prose(name),
            markup: markup(name),
        }
    }

    /// A transaction on the file as this one began, that diagnoses no
    /// failure: to see where one operation alone would match.
    pub(super) fn restarted(&self) -> Self {
        Transaction {
            doc: Doc::new(self.body),
            tracked: true,
            body: self.body,
            utf8: OnceCell::new(),
            entities: OnceCell::new(),
            indents: OnceCell::new(),
            opts: self.opts,
            budget: self.budget,
            diagnosing: false,
            exists: self.exists,
            act: None,
            moved: Vec::new(),
            prose: self.prose,
            markup: self.markup,
        }
    }
}

/// A create's replay: the file already reads exactly as the create sends it.
const CREATED_BEFORE: &str =
    "the file already reads exactly as this create sends it (it was created before)";

impl Transaction<'_, '_> {
    pub(super) fn run(&mut self, index: usize, op: &Operation) -> OpReport {
        let lines_before = self.doc.len();
        let read = op;
        let replaced = self.hint_replaced(read);
        let op = self.in_lines_now(op);
        let result = self
            .charge(index, &op)
            .and_then(|()| self.removed())
            .and_then(|()| self.reading(&op))
            .and_then(|op| {
                if let Some(act) = &op.act {
                    self.file_act(index, act)
                } else if let Some(after) = op.insert_after {
                    self.insert(after, &op)
                } else if op.search.is_empty() {
                    self.create(&op)
                } else {
                    self.edit(&op)
                }
            });
        let result = match (result, &replaced) {
            (
                Ok(Done {
                    outcome: OpOutcome::Applied,
                    lines: Some(at),
                    ..
                }),
                Some(r),
            ) if let Some(f) = Self::outside_replaced(r, at) => Err(f),
            (result, _) => result,
        };
        let result = result.map_err(|f| self.charge_miss(index, f));
        if let Ok(Done {
            outcome: OpOutcome::Applied,
            lines: Some([first, last]),
            ..
        }) = &result
        {
            let delta = self.doc.len() as isize - lines_before as isize;
            let (first, last) = (*first, *last);
            self.moved.push(Moved {
                first,
                last,
                delta,
                by: index,
            });
        }
        match result {
            Ok(mut d) => {
                d.warnings.extend(
                    replaced
                        .map(|r| r.warning)
                        .or_else(|| moved_note(read, &op)),
                );
                OpReport {
                    index,
                    outcome: d.outcome,
                    strategy: Some(d.strategy),
                    lines: d.lines,
                    warnings: d.warnings,
                    error: None,
                }
            }
            Err(f) => {
                let f = self.outside_scope(&op, f);
                OpReport {
                    index,
                    outcome: OpOutcome::Failed,
                    strategy: None,
                    lines: None,
                    warnings: Vec::new(),
                    error: Some(ErrorReport {
                        kind: f.kind,
                        operation: Some(index),
                        message: f.message,
                        hint: f.hint,
                        closest: f.closest,
                    }),
                }
            }
        }
    }

    /// Spends what operation `index` costs before it runs (see budget.rs),
    /// or fails it as `over_budget`: its own text, and for a regex, passes
    /// over the file. A match found at once costs little more (the file's
    /// lines are indexed); what a miss costs is charged once it is known
    /// (`charge_miss`).
    fn charge(&self, index: usize, op: &Operation) -> Result<(), Failure> {
        let passes = match op.find {
            Find::Regex(_) | Find::IgnoreCase(_) => budget::REGEX_WEIGHT,
            Find::Lines | Find::Text => 0,
        };
        let own = (op.search.len() + op.replace.len()) as u64;
        let file = passes.saturating_mul(self.body.len() as u64);
        self.budget
            .charge(own.saturating_add(file))
            .map_err(|spent| over_budget_failure(spent, Some(index)))
    }

    /// Spends what operation `index`'s failure cost: one pass over the file,
    /// as a miss climbs the tolerance ladder and looks for SEARCH as text.
    /// Past the budget, it fails as `over_budget` instead.
    fn charge_miss(&self, index: usize, failed: Failure) -> Failure {
        if failed.kind == ErrorKind::OverBudget {
            return failed;
        }
        match self.budget.charge(self.body.len() as u64) {
            Ok(()) => failed,
            Err(spent) => over_budget_failure(spent, Some(index)),
        }
    }

    /// Fails once an earlier operation removed the file: nothing is left to edit.
    pub(super) fn removed(&self) -> Result<(), Failure> {
        match &self.act {
            Some((FileAct::Delete { .. }, by)) => Err(Failure::new(
                ErrorKind::Deleted,
                format!("operation {by} deletes the file, so no later operation can edit it"),
                "edit the file before deleting it, or leave out the delete",
            )),
            _ => Ok(()),
        }
    }

    /// A patch's removal or move of the whole file, checked here and done by
    /// the caller, which owns the file system.
    fn file_act(&mut self, index: usize, act: &FileAct) -> Result<Done, Failure> {
        if !self.exists {
            let what = match act {
                FileAct::Delete { .. } => "deletes",
                FileAct::MoveTo(_) => "moves",
            };
            return Err(Failure::new(
                ErrorKind::NotFound,
                format!("the patch {what} this file, but there is no such file"),
                "check the path (a file deleted or moved before has nothing left to do so with)",
            ));
        }
        if let Some((FileAct::MoveTo(to), by)) = &self.act {
            return Err(Failure::new(
                ErrorKind::Malformed,
                format!("operation {by} already moves the file to {to}"),
                "move a file once per patch",
            ));
        }
        let done = match act {
            FileAct::Delete { listed: true } if !self.doc.is_empty() => {
                let left = self.doc.len();
                return Err(Failure::new(
                    ErrorKind::NotFound,
                    format!(
                        "the diff deletes the file, but {left} line(s) it does not list remain once its hunks are applied: the file changed since the diff was made"
                    ),
                    "read the file again and make the diff against its current content",
                ));
            }
            FileAct::Delete { .. } => {
                Done::applied("delete", None, vec!["the file is removed".into()])
            }
            FileAct::MoveTo(to) => {
                Done::applied("move", None, vec![format!("the file moves to {to}")])
            }
        };
        self.act = Some((act.clone(), index));
        Ok(done)
    }

    pub(super) fn utf8(&self) -> bool {
        *self
            .utf8
            .get_or_init(|| std::str::from_utf8(self.body).is_ok())
    }

    pub(super) fn tiers(&self) -> &'static [Tier] {
        if self.opts.tolerant && self.utf8() {
            &Tier::LADDER
        } else {
            &[]
        }
    }

    /// An empty SEARCH: creates the file, or fills an empty one.
    pub(super) fn create(&mut self, op: &Operation) -> Result<Done, Failure> {
        if !self.doc.is_empty() {
            // A create sent again (a re-sent patch's `*** Add File`) is a replay:
            // the file reads exactly as sent, so writing it would change nothing,
            // and a failure would send the agent to edit a file that is right.
            if same_text(&self.doc.to_bytes(), op.replace.as_bytes()) {
                let last = self.doc.len().max(1);
                return Ok(Done::replayed([1, last], CREATED_BEFORE));
            }
            let message = "the operation creates a file (an empty SEARCH, `*** Add File`, `create`), but this file already has content";
            return Err(Failure::new(
                ErrorKind::FileExists,
                message,
                "put the lines to change in SEARCH, or to add text, SEARCH for the line next to where it goes and repeat it in REPLACE",
            ));
        }
        self.doc = Doc::new(op.replace.clone().into_bytes());
        self.tracked = false;
        Ok(Done::applied("create", None, Vec::new()))
    }

    /// The text editor tool's `insert`: REPLACE's lines after file line `after`
    /// (0: at the top). Lines that already follow there as REPLACE are a replay,
    /// so a re-sent insertion never inserts twice.
    fn insert(&mut self, after: usize, op: &Operation) -> Result<Done, Failure> {
        if !self.exists {
            return Err(Failure::new(
                ErrorKind::NotFound,
                "`insert` needs an existing file, and this one does not exist",
                "create it with `create` (`file_text`) or an empty SEARCH",
            ));
        }
        let len = self.doc.len();
        if after > len {
            return Err(Failure::new(
                ErrorKind::NotFound,
                format!("`insert_line` is {after}, past the end of the file ({len} lines)"),
                format!("use a line number from 0 (the top) to {len} (after the last line)"),
            ));
        }
        let new: Vec<String> = text_lines(&op.replace)
            .into_iter()
            .map(str::to_owned)
            .collect();
        let lines = [after + 1, after + new.len()];
        let there = after + new.len() <= len
            && new
                .iter()
                .enumerate()
                .all(|(k, l)| self.doc.line(after + k) == l.as_bytes());
        // Blank lines prove nothing: a wanted blank line next to one is inserted.
        if there && new.iter().any(|l| !l.trim().is_empty()) {
            return Ok(Done::replayed(
                lines,
                "the lines after `insert_line` already read as `new_str`",
            ));
        }
        if !self.utf8() {
            return Err(Failure::new(
                ErrorKind::NotText,
                "the file is not UTF-8 text; `insert` needs text",
                "send a SEARCH/REPLACE block with the neighbouring line byte for byte",
            ));
        }
        if len == 0 {
            self.doc = Doc::new(op.replace.clone().into_bytes());
            self.tracked = false;
        } else {
            let (at, kept) = match after {
                0 => (0, new.len()),
                n => (n - 1, 0),
            };
            let mut with = new;
            with.insert(
                kept,
                String::from_utf8_lossy(self.doc.line(at)).into_owned(),
            );
            line_match::splice(&mut self.doc, at, 1, &with);
        }
        Ok(Done::applied("insert", Some(lines), Vec::new()))
    }

    pub(super) fn edit(&mut self, op: &Operation) -> Result<Done, Failure> {
        self.refuse_shape(op)?;
        // `*** End of File`: of several matches, the one nearest the last line.
        let at_end;
        let op = match op.end_of_file && op.near.is_none() {
            true => {
                at_end = Operation {
                    near: Some(self.doc.len().max(1)),
                    ..op.clone()
                };
                &at_end
            }
            false => op,
        };
        let mut done = match &op.find {
            Find::Lines => {
                let scope = self.after_anchor(op);
                match self.edit_lines(op, scope.clone()) {
                    Err(f) if f.kind == ErrorKind::Ambiguous => match self.anchored(op) {
                        Some((scope, near)) => {
                            let op = Operation {
                                near: Some(near),
                                ..op.clone()
                            };
                            self.edit_lines(&op, scope)
                        }
                        None => Err(f),
                    },
                    Err(f) => Err(self.before_anchor(op, scope.start, f)),
                    done => done,
                }
            }
            Find::Text => self.edit_text(op),
            Find::Regex(re) => self.edit_pattern(op, re, "regex"),
            Find::IgnoreCase(re) => self.edit_pattern(op, re, "ignore_case"),
        }?;
        if op.search == op.replace && done.outcome == OpOutcome::Applied {
            done.outcome = OpOutcome::Unchanged;
            done.warnings
                .push("SEARCH and REPLACE are identical: nothing to change".into());
        }
        Ok(done)
    }
}

/// The failure of the operation that found the work budget spent (see budget.rs).
pub(super) fn over_budget_failure(spent: budget::Spent, index: Option<usize>) -> Failure {
    let at = match index {
        Some(i) => format!(" at operation {i}"),
        None => " while the matches of an operation were gathered".into(),
    };
    Failure::new(
        ErrorKind::OverBudget,
        format!(
            "the transaction's work budget ({} units, about as many bytes read) ran out{at}",
            spent.total
        ),
        OVER_BUDGET_HINT,
    )
}

/// What to do about a transaction past its work budget.
pub(super) const OVER_BUDGET_HINT: &str = "send fewer operations per payload (split it), narrow each with a line range (`start_line`/`end_line`, `:start_line:`) or more distinctive SEARCH lines, and prefer plain SEARCH to a regex that reads the whole file";
