//! Completions and manual pages come from the same definitions as `--help`.

use std::process::Command;

fn editfs(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(args)
        .output()
        .expect("running editfs")
}

#[test]
fn completions_cover_every_subcommand_in_each_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = editfs(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        for sub in ["apply", "mount", "unmount", "history", "show", "undo"] {
            assert!(script.contains(sub), "{shell} completion lacks `{sub}`");
        }
    }
    let bash = String::from_utf8(editfs(&["completions", "bash"]).stdout).unwrap();
    assert!(
        bash.contains("--edits-only"),
        "bash completion lacks mount's options"
    );
}

#[test]
fn man_prints_the_top_page_and_each_subcommand_page() {
    let top = String::from_utf8(editfs(&["man"]).stdout).unwrap();
    assert!(top.contains(".TH editfs 1"), "{top}");
    assert!(top.contains("SUBCOMMANDS"), "top page lists subcommands");
    let mount = editfs(&["man", "mount"]);
    assert!(mount.status.success());
    let mount = String::from_utf8(mount.stdout).unwrap();
    assert!(mount.contains(".TH editfs-mount 1"), "{mount}");
    assert!(
        mount.contains("edits\\-only"),
        "mount page lists its options"
    );
    let bad = editfs(&["man", "nosuch"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no subcommand `nosuch`"));
}

#[test]
fn man_out_dir_writes_one_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = editfs(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    for page in [
        "editfs.1",
        "editfs-mount.1",
        "editfs-apply.1",
        "editfs-undo.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}: {text}"
        );
    }
}

/// A page's SYNOPSIS section as a reader sees it (roff's `\-` as `-`, fonts dropped).
fn synopsis(page: &str) -> String {
    let section = page
        .split_once(".SH SYNOPSIS\n")
        .expect("a SYNOPSIS section")
        .1;
    let section = section.split_once("\n.SH").map_or(section, |(s, _)| s);
    section
        .replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fR", "")
        .replace("\\fI", "")
}

#[test]
fn a_pages_synopsis_names_the_value_each_option_takes() {
    let mount = String::from_utf8(editfs(&["man", "mount"]).stdout).unwrap();
    let shown = synopsis(&mount);
    for wanted in [
        "editfs mount",
        "[--match <MATCHING>]",
        "[-o <OPTIONS>]",
        "[--state-dir <DIR>]",
        "[--edits-only]",
        "[--no-snapshot <GLOB>]...",
        "<SOURCE> <MOUNTPOINT>",
    ] {
        assert!(
            shown.contains(wanted),
            "SYNOPSIS lacks {wanted:?}:\n{shown}"
        );
    }
    let apply = String::from_utf8(editfs(&["man", "apply"]).stdout).unwrap();
    assert!(
        synopsis(&apply).contains("[--multi <ROOT>]"),
        "{}",
        synopsis(&apply)
    );
}

#[test]
fn man_out_dir_writes_the_top_page_and_one_per_subcommand_and_no_help_pages() {
    let dir = tempfile::tempdir().unwrap();
    let out = editfs(&["man", "--out-dir", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let mut written: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let help = String::from_utf8(editfs(&["--help"]).stdout).unwrap();
    let mut wanted: Vec<String> = help
        .split_once("Commands:\n")
        .unwrap()
        .1
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(|c| format!("editfs-{c}.1"))
        .collect();
    wanted.push("editfs.1".into());
    wanted.sort();
    assert_eq!(written, wanted);
    let mount = std::fs::read_to_string(dir.path().join("editfs-mount.1")).unwrap();
    assert!(synopsis(&mount).contains("[-o <OPTIONS>]"), "{mount}");
}

/// The section for an agent's system prompt stays short enough to paste whole, and
/// says what an agent must know: the example, the exit status, ambiguity, several
/// files, undo.
#[test]
fn the_prompt_fits_in_25_lines_and_says_what_an_agent_must_know() {
    let out = editfs(&["prompt", "/mnt/project"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines = text.lines().count();
    assert!(lines <= 25, "{lines} lines:\n{text}");
    for format in ["patch", "json"] {
        let out = editfs(&["prompt", "/mnt/project", "--format", format]);
        assert!(out.status.success(), "{format}: {out:?}");
        let other = String::from_utf8(out.stdout).unwrap();
        assert!(other.lines().count() <= 25, "{format}:\n{other}");
        assert!(other != text, "{format} has its own wording");
        assert!(other.contains("ambiguous") && other.contains("/mnt/project/.editfs/undo"));
    }
    for needed in [
        "cat > /mnt/project/src/app.py.edit <<'EOF'",
        "<<<<<<< SEARCH",
        "nothing changed",
        "ambiguous",
        "placeholder",
        "/mnt/project/.editfs/edit",
        "/mnt/project/.editfs/undo",
        "/mnt/project/.editfs/README",
    ] {
        assert!(
            text.contains(needed),
            "the prompt lacks {needed:?}:\n{text}"
        );
    }
}
