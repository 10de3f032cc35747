//! What the history says of a path a payload names that is not there: a
//! file deleted or moved by an earlier transaction (a re-sent deletion or
//! move is already applied), and the files of the same name elsewhere that
//! the payload may have meant.

use rustix::fs::AtFlags;

use crate::engine::payload::{Payload, Tree};
use crate::engine::{self, FileAct, Options};
use crate::report::ErrorKind;
use crate::store::{LogKind as Kind, Store, project_path};
use crate::{Root, Who, open_bounded};

use super::MultiReport;

/// Files whose sections a failed payload's hint points elsewhere at most: each
/// costs a walk of the tree.
const NAMESAKE_FILES: usize = 3;

/// Where a section named a file that does not exist and its SEARCH found
/// nothing, the hint names the files of that name the payload may have meant
/// (`Root::namesakes`) instead of inviting a new file. It runs once the locks
/// are let go: the walk is no business of other edits. A file the history
/// shows an edit removed is not one to make anew: the hint says where it went.
pub(super) fn point_to_namesakes(
    (store, root): (Option<&Store>, Root<'_>),
    who: &Who,
    report: &mut MultiReport,
) {
    let missing = |rel: &str| {
        matches!(
            rustix::fs::statat(root.fd, rel, AtFlags::SYMLINK_NOFOLLOW),
            Err(rustix::io::Errno::NOENT)
        )
    };
    let mut walks = 0;
    for r in &mut report.files {
        let Some(e) = r.error.as_mut() else {
            continue;
        };
        if e.kind != ErrorKind::Edit(engine::ErrorKind::NotFound)
            || walks == NAMESAKE_FILES
            || !missing(&r.file)
        {
            continue;
        }
        let removed = store.and_then(|s| Some((s, removed_by_an_edit((s, root), who, &r.file)?)));
        let hint = match removed {
            Some((s, entry)) => removed_hint(s, &r.file, &entry),
            None => {
                walks += 1;
                let creates = e.hint.as_deref() == Some(engine::EMPTY_FILE);
                let found = root.namesakes(&r.file, who.caller.as_ref());
                namesakes_hint(&r.file, &found, creates)
            }
        };
        if let Some(top) = report.error.as_mut()
            && top.message.starts_with(&format!("{}: ", r.file))
        {
            top.hint = Some(hint.clone());
        }
        e.hint = Some(hint);
    }
}

/// The hint for a section whose file `rel` an edit removed (`entry`): where
/// it went, if that edit made a file of the same bytes (as kept), or the
/// files it made, one of which may be where it moved with changes.
fn removed_hint(store: &Store, rel: &str, entry: &crate::store::LogEntry) -> String {
    use crate::store::Side;
    let was = store.objects().read(Side::Pre, rel, entry.tx);
    let made: Vec<&crate::store::FileEntry> = entry.files.iter().filter(|f| f.created).collect();
    let moved = made
        .iter()
        .find(|f| was.is_some() && store.objects().read(Side::Post, &f.file, entry.tx) == was);
    let went = match (moved, made.as_slice()) {
        (Some(f), _) => format!("it moved to `{}`", f.file),
        (None, []) => "it was deleted".to_owned(),
        (None, made) => {
            let named: Vec<String> = made.iter().map(|f| format!("`{}`", f.file)).collect();
            format!(
                "it was deleted or moved: that transaction made {}",
                named.join(", ")
            )
        }
    };
    format!(
        "`{rel}` was removed by transaction {} (an edit), and nothing is at that path since: {went}; if this payload was sent before, that part is done; otherwise edit the file where it is now, or write `{rel}` whole to make it again",
        entry.tx
    )
}

/// The hint for a section whose file `rel` does not exist, files of that name
/// `found`; where SEARCH found nothing (`creates`), it also says how to make
/// the file, as the engine's own hint did.
fn namesakes_hint(rel: &str, found: &[String], creates: bool) -> String {
    let create = if creates {
        format!("; an empty SEARCH would create `{rel}`")
    } else {
        String::new()
    };
    if found.is_empty() {
        return format!("there is no file `{rel}`, nor any of that name in the project{create}");
    }
    let listed: Vec<String> = found.iter().map(|f| format!("`{f}`")).collect();
    format!(
        "there is no file `{rel}`; the project has {} of that name: {}; name the one meant by its path from the project's root{create}",
        if found.len() == 1 { "one" } else { "files" },
        listed.join(", ")
    )
}

/// A section that only deletes a file that is gone, where the history shows
/// an edit (a patch's delete or move) removed it with nothing done at that
/// path since: a patch sent again (after a timeout, say) is `already applied`
/// there, not `not_found`. A path never there, or last removed by other means
/// (`rm` through the mount), still fails; so does one whose last change the
/// caller may not see (sight.rs), as the answer would tell a hidden history.
/// A unified diff lists the lines it deletes: where the file as it was is
/// kept, they must be all of it, or the section fails as it did.
pub(super) fn deleted_before(
    (store, root): (Option<&Store>, Root<'_>),
    (opts, who): (&Options, &Who),
    rel: &str,
    ops: &Payload,
) -> Option<engine::Edit> {
    let edit = engine::deleted_before(rel, ops)?;
    let store = store?;
    let entry = removed_by_an_edit((store, root), who, rel)?;
    let removals = engine::removals(ops);
    let was = store.objects().read(crate::store::Side::Pre, rel, entry.tx);
    let listed = match (removals.operations.is_empty(), was) {
        (false, Some(was)) => engine::apply_parsed(rel, Some(&was), removals, opts)
            .content
            .is_some_and(|left| left.iter().all(u8::is_ascii_whitespace)),
        _ => true,
    };
    listed.then_some(edit)
}

/// The last change at `rel`, where it is an edit that removed the file and
/// the caller may see it (sight.rs): a hidden history reads as none.
fn removed_by_an_edit(
    (store, root): (&Store, Root<'_>),
    who: &Who,
    rel: &str,
) -> Option<crate::store::LogEntry> {
    let last = store.last_change(rel)?;
    let removed = last.kind == Kind::Edit && last.file(rel).is_some_and(|f| f.removed);
    let seen = who
        .caller
        .as_ref()
        .is_none_or(|c| c.sees(&root.fd, &last, &mut crate::sight::Now::new()));
    (removed && seen).then_some(last)
}

/// A section that moves a file that is gone (after its hunks, if any), where
/// the history shows an edit moved it to the path this move names (the same
/// transaction removed it and created that file) and the file there already
/// reads as the hunks make it: a patch sent again is `already applied`. The
/// hunks run on the file where it went, with the caller's rights; one that
/// would still change it leaves the section to fail as it did.
pub(super) fn moved_before(
    (store, root): (Option<&Store>, Root<'_>),
    (opts, who): (&Options, &Who),
    rel: &str,
    ops: &Payload,
) -> Option<engine::Edit> {
    let (last, hunks) = ops.operations.split_last()?;
    let Some(FileAct::MoveTo(to)) = &last.act else {
        return None;
    };
    let to = project_path(&root.locate(to).ok()?).ok()?;
    let entry = removed_by_an_edit((store?, root), who, rel)?;
    entry.file(&to).filter(|f| f.created)?;
    let reports = match hunks {
        [] => Vec::new(),
        _ => {
            let opened = open_bounded(root, &to, who.caller.as_ref(), opts.max_file).ok()?;
            let there = Payload {
                operations: hunks.to_vec(),
                notes: Vec::new(),
            };
            let edit = engine::apply_parsed(&to, Some(opened.bytes.as_deref()?), there, opts);
            edit.content.is_none().then_some(edit.report.operations)?
        }
    };
    engine::moved_before(rel, ops, &reports)
}
