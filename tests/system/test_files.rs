//! The integration tests stay in few binaries: every test file is a module its
//! binary's `main.rs` declares. Cargo makes a binary of each file at the top of
//! `tests/`, linking the whole crate once more, and compiles no file that no
//! `mod` line names, so a file left there never runs.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
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
    let loose = rust_files(&tests_dir());
    assert!(
        loose.is_empty(),
        "tests/ holds {loose:?}: each would be a binary of its own; make it a module of a binary under tests/"
    );
}

#[test]
fn every_test_file_is_a_module_its_binary_declares() {
    let mut binaries = 0;
    for dir in fs::read_dir(tests_dir())
        .unwrap()
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
    assert!(binaries >= 2, "found {binaries} test binaries under tests/");
}
