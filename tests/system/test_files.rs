//! The integration tests stay in few binaries: every test file is a module its
//! binary's `main.rs` declares. Cargo makes a binary of each file at the top of
//! a crate's `tests/`, linking the whole crate once more, and compiles no file that
//! no `mod` line names, so a file left there never runs.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The `tests/` folder of the root crate and of each crate under `crates/`.
fn tests_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("tests")];
    for krate in fs::read_dir(root.join("crates")).unwrap() {
        let tests = krate.unwrap().path().join("tests");
        if tests.is_dir() {
            dirs.push(tests);
        }
    }
    dirs
}

/// The names of the `.rs` files directly in `dir`, without the extension.
fn rust_files(dir: &Path) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// The modules a `main.rs` declares with a `mod NAME;` line.
fn declared(main: &str) -> BTreeSet<String> {
    main.lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .map(String::from)
        .collect()
}

#[test]
fn no_test_file_is_a_binary_of_its_own() {
    for dir in tests_dirs() {
        let loose = rust_files(&dir);
        assert!(
            loose.is_empty(),
            "{} holds {loose:?}: each would be a binary of its own; make it a module of a binary under it",
            dir.display()
        );
    }
}

#[test]
fn every_test_file_is_a_module_its_binary_declares() {
    let mut binaries = 0;
    for dir in tests_dirs()
        .iter()
        .flat_map(|d| fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
    {
        let Ok(main) = fs::read_to_string(dir.join("main.rs")) else {
            continue;
        };
        binaries += 1;
        let mut files = rust_files(&dir);
        files.remove("main");
        let modules = declared(&main);
        let orphans: Vec<_> = files.difference(&modules).collect();
        assert!(
            orphans.is_empty(),
            "{}/main.rs declares no module for {orphans:?}: their tests never run",
            dir.display()
        );
    }
    assert!(binaries >= 2, "found {binaries} test binaries");
}
