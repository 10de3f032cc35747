//! What the log says, for people: `editfs history`, `editfs show`, and
//! `.editfs/history` in the mount.

use std::fmt::Write;

use serde_json::Value;

use crate::engine::diff::file_diff;
use crate::store::Store;
use crate::store::objects::Side;

fn files_of(e: &Value) -> Vec<&Value> {
    e["files"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// One line per transaction (on `path` only, if given), oldest first.
pub fn table(entries: &[Value], path: Option<&str>) -> String {
    let mut out =
        String::from("TX     TIME                  OUTCOME   KIND    LINES       FILES  (WHO)\n");
    for e in entries {
        let files = files_of(e);
        if path.is_some_and(|p| !files.iter().any(|f| f["file"] == p)) {
            continue;
        }
        let sum = |k: &str| files.iter().filter_map(|f| f[k].as_u64()).sum::<u64>();
        let names: Vec<&str> = files.iter().filter_map(|f| f["file"].as_str()).collect();
        let who = match (e["pid"].as_u64(), e["command"].as_str()) {
            (Some(pid), Some(cmd)) if !cmd.is_empty() => format!("  (pid {pid}: {cmd})"),
            (Some(pid), _) if pid > 0 => format!("  (pid {pid})"),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{:<6} {:<21} {:<9} {:<7} {:<11} {}{who}",
            e["tx"].as_u64().unwrap_or(0),
            e["time"].as_str().unwrap_or(""),
            e["outcome"].as_str().unwrap_or("?"),
            e["kind"].as_str().unwrap_or("edit"),
            format!("+{} -{}", sum("lines_added"), sum("lines_removed")),
            names.join(" "),
        );
    }
    out
}

/// Transaction `tx` as a diff of each file it changed.
pub fn show(store: &Store, tx: u64) -> Result<String, String> {
    let entries = store.entries();
    let e = entries
        .iter()
        .find(|e| e["tx"].as_u64() == Some(tx))
        .ok_or(format!("no transaction {tx} in the log"))?;
    let mut out = table(std::slice::from_ref(e), None);
    if e["outcome"] != "ok" {
        out.push_str("it changed nothing");
        if let Some(kind) = e["error"].as_str() {
            let _ = write!(out, " (error: {kind})");
        }
        out.push('\n');
        return Ok(out);
    }
    for f in files_of(e) {
        let rel = f["file"].as_str().unwrap_or_default();
        let before = store.objects().read(Side::Pre, rel, tx);
        let after = store.objects().read(Side::Post, rel, tx);
        match (before, after) {
            (_, None) if e["kind"] == "direct" => {
                let _ = writeln!(
                    out,
                    "\n{rel}: a write outside the control files; its pre-image is kept as snapshots/{rel}/{tx}"
                );
            }
            (b, Some(a)) => {
                out.push('\n');
                out.push_str(&file_diff(b.as_deref().unwrap_or_default(), &a, rel));
            }
            (_, None) => {
                let _ = writeln!(
                    out,
                    "\n{rel}: the versions of this transaction are no longer kept"
                );
            }
        }
    }
    Ok(out)
}
