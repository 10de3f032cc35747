//! The README and the pages under `docs/` stay true: every link and `#anchor`
//! resolves, the README stays short and gives the command CI runs, the code layout
//! names every source file, the configuration page every option `--help` has, and
//! no folder of src/ imports itself in a circle (`scripts/check-import-cycles`).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README.md, SECURITY.md and every page under docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md"), root().join("SECURITY.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// An opening or closing code fence: three or more backticks, and no backtick in
/// the info string (as CommonMark reads it, so ```` ```a ```` in prose is no fence).
fn fence(line: &str) -> Option<(usize, &str)> {
    let ticks = line.len() - line.trim_start_matches('`').len();
    let info = &line[ticks..];
    (ticks >= 3 && !info.contains('`')).then_some((ticks, info.trim()))
}

/// The lines of a page outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut open: Option<usize> = None;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        match (fence(line), open) {
            (Some((ticks, _)), None) => open = Some(ticks),
            (Some((ticks, "")), Some(opened)) if ticks >= opened => open = None,
            (_, None) => lines.push((n + 1, line)),
            _ => {}
        }
    }
    lines
}

/// GitHub's anchor for a heading: markup dropped, lower case, punctuation other
/// than `-` and `_` dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a page's headings make; a repeated one gets `-1`, `-2`, as GitHub does.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let level = line.len() - line.trim_start_matches('#').len();
        if !(1..=6).contains(&level) || !line[level..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[level..]);
        let count = seen.entry(base.clone()).or_insert(0);
        out.insert(match *count {
            0 => base.clone(),
            n => format!("{base}-{n}"),
        });
        *count += 1;
    }
    out
}

/// The line with inline code spans taken out, so `[a](b)` in backticks is no link.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let marker = &rest[start..start + ticks];
        let after = &rest[start + ticks..];
        match after.find(marker) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Every `[text](target)` link of a page, with its line number.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in prose(text) {
        let line = without_code(line);
        for (i, _) in line.match_indices("](") {
            if let Some(end) = line[i + 2..].find(')') {
                found.push((n, line[i + 2..i + 2 + end].to_string()));
            }
        }
    }
    found
}

/// Where each link fails to resolve: a missing file, or an anchor no heading makes.
fn broken_links(page: &Path) -> Vec<String> {
    let text = read(page);
    let dir = page.parent().unwrap();
    let mut broken = Vec::new();
    for (n, target) in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let path = if file.is_empty() {
            page.to_path_buf()
        } else {
            dir.join(file)
        };
        let place = format!("{}:{n}: {target}", page.display());
        if !path.exists() {
            broken.push(format!("{place}: no file {}", path.display()));
        } else if let Some(anchor) = anchor {
            let there = anchors(&read(&path));
            if !there.contains(anchor) {
                broken.push(format!(
                    "{place}: no heading makes #{anchor}; there are {there:?}"
                ));
            }
        }
    }
    broken
}

#[test]
fn every_link_and_anchor_of_the_readme_and_docs_resolves() {
    let broken: Vec<String> = pages().iter().flat_map(|p| broken_links(p)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn a_broken_anchor_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("a.md");
    std::fs::write(
        &page,
        "# A\n\n## Two words\n\n[ok](#two-words) [gone](#three-words) `[code](#x)`\n\n```text\n[fenced](#y)\n```\n[file](b.md)\n",
    )
    .unwrap();
    let broken = broken_links(&page);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(broken[0].contains("#three-words"), "{broken:?}");
    assert!(broken[1].contains("no file"), "{broken:?}");
}

#[test]
fn anchors_follow_githubs_rules() {
    let text = "## `editfs apply`: the same engine\n## fstab and mount(8)\n## Notes\n## Notes\n";
    let made = anchors(text);
    for wanted in [
        "editfs-apply-the-same-engine",
        "fstab-and-mount8",
        "notes",
        "notes-1",
    ] {
        assert!(made.contains(wanted), "{wanted} not in {made:?}");
    }
}

#[test]
fn the_readme_fits_in_200_lines() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines; move detail to docs/"
    );
}

#[test]
fn the_readme_says_how_to_install_and_where_the_binary_goes() {
    let text = read(&root().join("README.md"));
    for needed in [
        "cargo install --path .",
        "~/.cargo/bin/editfs",
        "target/release/editfs",
        "/usr/local/bin",
        "./scripts/demo.sh",
    ] {
        assert!(text.contains(needed), "README lacks {needed:?}");
    }
}

/// The commands of `.ci/run`, comments and blank lines aside.
fn ci_commands() -> Vec<String> {
    read(&root().join(".ci/run"))
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

#[test]
fn the_readmes_test_command_is_the_one_ci_runs() {
    let readme = read(&root().join("README.md"));
    let commands: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("cargo test"))
        .map(|l| l.split(" #").next().unwrap().trim())
        .collect();
    assert_eq!(
        commands.len(),
        1,
        "README gives one test command: {commands:?}"
    );
    let ci = ci_commands();
    assert_eq!(
        ci.last().map(String::as_str),
        Some(commands[0]),
        ".ci/run ends with another command than the README's {:?}",
        commands[0]
    );
}

/// Every file under `dir`, relative to the crate's root.
fn files_under(dir: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            let rel = path.strip_prefix(root()).unwrap();
            files.insert(rel.to_string_lossy().into_owned());
        }
    }
    files
}

/// The files the code layout of docs/architecture.md names: the first word of each
/// line of the first fenced block after its "Code layout" heading, under `src/` or
/// a crate's folder.
fn layout_files() -> BTreeSet<String> {
    let text = read(&root().join("docs/architecture.md"));
    let section = text
        .split_once("\n## Code layout\n")
        .expect("docs/architecture.md has a Code layout section")
        .1;
    let block = section
        .split_once("```text\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .expect("the Code layout section has a text block")
        .0;
    block
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| (w.starts_with("src/") || w.starts_with("crates/")) && !w.ends_with('/'))
        .map(String::from)
        .collect()
}

#[test]
fn the_code_layout_lists_every_source_file_and_no_other() {
    let mut real = files_under(&root().join("src"));
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        real.extend(files_under(&krate.unwrap().path().join("src")));
    }
    let listed = layout_files();
    let missing: Vec<_> = real.difference(&listed).collect();
    let gone: Vec<_> = listed.difference(&real).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/architecture.md's code layout misses {missing:?} and names files that do not exist: {gone:?}"
    );
}

/// Runs `scripts/check-import-cycles` on the repository at `root`.
fn check_import_cycles(root: &Path) -> std::process::Output {
    std::process::Command::new("python3")
        .arg(self::root().join("scripts/check-import-cycles"))
        .arg(root)
        .output()
        .expect("python3 runs scripts/check-import-cycles")
}

#[test]
fn no_folder_of_src_imports_itself_in_a_circle() {
    let out = check_import_cycles(&root());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A crate whose folder `layer` imports itself in a circle, one -> two ->
/// three -> one, through a use tree, a path in code and a test module, with
/// `allowed` as its list of allowed edges.
fn crate_with_a_circle(allowed: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/layer")).unwrap();
    std::fs::create_dir_all(dir.path().join("scripts")).unwrap();
    let files = [
        ("src/lib.rs", "mod layer;\n"),
        ("src/layer/mod.rs", "mod one;\nmod two;\nmod three;\n"),
        ("src/layer/one.rs", "use super::{two::{self, Two}};\n"),
        (
            "src/layer/two.rs",
            "pub struct Two;\nfn f() { crate::layer::three::g() }\n",
        ),
        (
            "src/layer/three.rs",
            "pub fn g() {}\n#[cfg(test)]\nmod tests {\n    use super::super::one;\n}\n",
        ),
        ("scripts/import-cycles-allowed", allowed),
    ];
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

#[test]
fn an_import_circle_is_found_and_named() {
    let dir = crate_with_a_circle("");
    let out = check_import_cycles(dir.path());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "no circle found: {said}");
    assert!(
        said.contains("layer: import circle one -> two -> three -> one"),
        "{said}"
    );
}

#[test]
fn a_circle_is_found_while_one_of_its_edges_is_not_allowed() {
    let dir = crate_with_a_circle("layer: one -> two\nlayer: two -> three\n");
    let out = check_import_cycles(dir.path());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "no circle found: {said}");
    assert!(
        said.contains("layer: import circle three -> one -> two -> three"),
        "{said}"
    );
    let all = "layer: one -> two\nlayer: two -> three\nlayer: three -> one\n";
    let out = check_import_cycles(crate_with_a_circle(all).path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_allowed_edge_of_a_folder_that_is_gone_fails() {
    let all = "layer: one -> two\nlayer: two -> three\nlayer: three -> one\n";
    let dir = crate_with_a_circle(&format!("{all}mount: core -> watch\n"));
    let out = check_import_cycles(dir.path());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an edge of no folder passed: {said}");
    assert!(
        said.contains("mount: core -> watch is allowed but no folder is named mount"),
        "{said}"
    );
}

fn editfs_help(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_editfs"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "editfs {args:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands `editfs --help` lists, `help` aside.
fn subcommands() -> Vec<String> {
    let top = editfs_help(&[]);
    let list = top.split_once("Commands:\n").unwrap().1;
    list.lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The options in the Options section of a help text (`--keep`, `-o`), help and
/// version aside.
fn options(help: &str) -> Vec<String> {
    let Some((_, section)) = help.split_once("\nOptions:\n") else {
        return Vec::new();
    };
    section
        .lines()
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .filter(|l| l.trim_start().starts_with('-') && l.len() - l.trim_start().len() <= 6)
        .filter_map(|l| {
            l.split(|c: char| c == ',' || c.is_whitespace())
                .filter(|w| w.starts_with('-'))
                .find(|w| w.starts_with("--"))
                .or_else(|| l.split_whitespace().next())
                .map(String::from)
        })
        .filter(|o| o != "--help" && o != "--version")
        .collect()
}

#[test]
fn the_configuration_page_names_every_command_and_option() {
    let page = read(&root().join("docs/configuration.md"));
    let mut missing = Vec::new();
    for command in subcommands() {
        if !page.contains(&format!("## `editfs {command}`")) {
            missing.push(format!("editfs {command}"));
        }
        for option in options(&editfs_help(&[&command])) {
            if !page.contains(&format!("| `{option}")) {
                missing.push(format!("editfs {command} {option}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/configuration.md lacks {missing:?}"
    );
}

#[test]
fn each_docs_page_says_whom_it_is_for_and_lists_its_sections() {
    for page in pages()
        .iter()
        .filter(|p| p.parent().unwrap().ends_with("docs"))
    {
        let text = read(page);
        let head: Vec<&str> = text.lines().take(8).collect();
        assert!(
            head.iter().any(|l| l.starts_with("For ")),
            "{} does not open by saying whom it is for",
            page.display()
        );
        let sections: Vec<String> = prose(&text)
            .iter()
            .filter_map(|(_, l)| l.strip_prefix("## "))
            .map(|h| format!("(#{})", slug(&h.replace('`', ""))))
            .collect();
        let contents: Vec<&str> = text
            .split_once("**Contents**\n\n")
            .unwrap_or_else(|| panic!("{} has no table of contents", page.display()))
            .1
            .lines()
            .take_while(|l| l.starts_with("- ["))
            .collect();
        for section in sections {
            assert!(
                contents.iter().any(|l| l.ends_with(&section)),
                "{}: the contents lack {section}",
                page.display()
            );
        }
    }
}

/// Every `docs/PAGE.md#anchor` a text cites.
fn citations(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for (i, _) in text.match_indices("docs/") {
        let rest = &text[i + 5..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || matches!(c, '.' | '#' | '-' | '_')))
            .unwrap_or(rest.len());
        // `docs/PAGE.md#anchor` in a comment is a pattern, not a citation.
        if let Some((page, anchor)) = rest[..end]
            .split_once(".md#")
            .filter(|(page, _)| page.chars().all(|c| !c.is_uppercase()))
        {
            found.push((format!("{page}.md"), anchor.to_string()));
        }
    }
    found
}

#[test]
fn the_docs_sections_that_tests_and_code_cite_exist() {
    let mut cited = Vec::new();
    for dir in ["tests", "src"] {
        for file in files_under(&root().join(dir)) {
            if file.ends_with(".rs") || file.ends_with(".md") {
                for (page, anchor) in citations(&read(&root().join(&file))) {
                    cited.push((file.clone(), page, anchor));
                }
            }
        }
    }
    assert!(!cited.is_empty(), "no test cites docs/ any more");
    let broken: Vec<String> = cited
        .iter()
        .filter(|(_, page, anchor)| {
            let path = root().join("docs").join(page);
            !path.exists() || !anchors(&read(&path)).contains(anchor)
        })
        .map(|(file, page, anchor)| format!("{file}: docs/{page}#{anchor}"))
        .collect();
    assert!(
        broken.is_empty(),
        "cited sections that do not exist: {broken:?}"
    );
}
