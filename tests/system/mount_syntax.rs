//! The outcome's syntax check through a real mount: an edit that applies as
//! written but leaves the file unparsable where it changed it is refused
//! (`syntax`), unless the mount or the payload says to write it anyway.

use crate::common;

use std::fs;
use std::path::Path;

use common::Mount;

const APP: &str = "def greet(name):\n    print(\"Hello, \" + name)\n";

/// The issue's break: the new `if`'s body left level with it, as a
/// re-indentation that shifted only SEARCH's own lines leaves it.
const LEVEL_BODY: &str = r#"<<<<<<< SEARCH
    print("Hello, " + name)
=======
    if not name:
    name = "world"
    print("Hello, " + name)
>>>>>>> REPLACE
"#;

fn project(src: &Path) {
    fs::write(src.join("app.py"), APP).unwrap();
    fs::write(src.join("util.js"), "function f(a) {\n  return a;\n}\n").unwrap();
    fs::write(src.join("notes.txt"), "if x:\npass\n").unwrap();
}

macro_rules! mount {
    ($($arg:expr),*) => {
        match Mount::start(&[$($arg),*], project) {
            Some(m) => m,
            None => return,
        }
    };
}

fn json(m: &Mount, status: &str) -> serde_json::Value {
    serde_json::from_str(&m.ok(&format!("cat {status}"))).unwrap()
}

#[test]
fn a_body_left_level_with_its_if_is_refused_as_syntax_and_nothing_is_written() {
    let m = mount!();
    let out = m.sh(&format!("cat > app.py.edit <<'EOF'\n{LEVEL_BODY}EOF"));
    assert_eq!(out.status.code(), Some(1), "cat must fail");
    assert_eq!(
        m.src_file("app.py"),
        APP.as_bytes(),
        "the file is unchanged"
    );
    let status = m.ok("cat app.py.status");
    assert!(status.starts_with("FAILED app.py"), "{status}");
    assert!(
        status.contains("error (syntax): the edit would leave the file unparsable: line 3, column 5: expected an indented block after `if` on line 2"),
        "{status}"
    );
    assert!(
        status.contains("2 |     if not name:\n3 |     name = \"world\"\n  |     ^\n"),
        "the offending lines: {status}"
    );
    assert!(
        status.contains("hint: indent the body under line 2"),
        "{status}"
    );
    let report = json(&m, "app.py.status.json");
    assert_eq!(report["error"]["kind"], "syntax");
    assert_eq!(report["syntax"]["result"], "error");
    assert_eq!(report["syntax"]["line"], 3);
    assert_eq!(report["syntax"]["column"], 5);
    assert_eq!(report["operations"][0]["outcome"], "matched");
}

#[test]
fn a_success_says_which_parser_checked_the_file() {
    let m = mount!();
    m.ok(r#"cat > app.py.edit <<'EOF'
<<<<<<< SEARCH
    print("Hello, " + name)
=======
    if not name:
        name = "world"
    print("Hello, " + name)
>>>>>>> REPLACE
EOF"#);
    let status = m.ok("cat app.py.status");
    assert!(
        status.contains("syntax: ok, checked by tree-sitter-python"),
        "{status}"
    );
    let report = json(&m, "app.py.status.json");
    assert_eq!(report["syntax"]["result"], "ok");
    assert!(
        report["syntax"]["parser"]
            .as_str()
            .is_some_and(|p| p.starts_with("tree-sitter-python"))
    );
    // A file in no language the check parses is written as sent, with no syntax line.
    m.ok("printf '<<<<<<< SEARCH\\npass\\n=======\\n  pass\\n>>>>>>> REPLACE\\n' | cat > notes.txt.edit");
    let status = m.ok("cat notes.txt.status");
    assert!(!status.contains("syntax:"), "{status}");
}

#[test]
fn under_warn_the_broken_file_is_written_and_the_report_says_where() {
    let m = mount!("--syntax-check", "warn");
    m.ok(&format!("cat > app.py.edit <<'EOF'\n{LEVEL_BODY}EOF"));
    assert!(m.ok("cat app.py").contains("    if not name:\n    name"));
    let status = m.ok("cat app.py.status");
    assert!(status.starts_with("OK app.py"), "{status}");
    assert!(
        status.contains("syntax: WRITTEN BROKEN (--syntax-check warn): line 3, column 5"),
        "{status}"
    );
    assert_eq!(json(&m, "app.py.status.json")["syntax"]["result"], "error");
}

#[test]
fn a_payload_can_say_to_write_it_anyway() {
    let m = mount!();
    let marked = LEVEL_BODY.replacen("SEARCH\n", "SEARCH\n:syntax_check: off\n", 1);
    m.ok(&format!("cat > app.py.edit <<'EOF'\n{marked}EOF"));
    assert!(m.ok("cat app.py").contains("    if not name:\n    name"));
    assert!(
        m.ok("cat app.py.status")
            .contains("turned the syntax check off")
    );
    let payload = r#"{"search": "  return a;\n", "replace": "  return a +;\n"}"#;
    let out = m.sh(&format!("printf '%s' '{payload}' | cat > util.js.edit"));
    assert_eq!(out.status.code(), Some(1), "without it the check holds");
    assert!(m.ok("cat util.js").contains("return a;"));
    let anyway = payload.replacen('}', r#", "syntax_check": "off"}"#, 1);
    m.ok(&format!("printf '%s' '{anyway}' | cat > util.js.edit"));
    assert!(m.ok("cat util.js").contains("return a +;"));
}

#[test]
fn a_file_already_broken_elsewhere_still_accepts_edits() {
    let m = mount!();
    m.ok("printf 'def greet(name):\\n    return name\\n\\n\\ndef later(:\\n    pass\\n' > app.py");
    m.ok(r#"cat > app.py.edit <<'EOF'
<<<<<<< SEARCH
    return name
=======
    return name.strip()
>>>>>>> REPLACE
EOF"#);
    assert!(m.ok("cat app.py").contains("name.strip()"));
    let status = m.ok("cat app.py.status");
    assert!(
        status.contains("the file was already broken before this edit: line 5, column 11: expected `)` to close the `(` on line 5")
            && status.contains("the file already had left as they were"),
        "the report says where the old breakage stands: {status}"
    );
    let syntax = &json(&m, "app.py.status.json")["syntax"];
    assert_eq!(syntax["result"], "ok");
    assert_eq!(syntax["checked"], "file");
    assert_eq!(syntax["broken_before"]["line"], 5, "{syntax}");
    // A break of its own is still refused, the old one notwithstanding.
    let out = m.sh(r#"cat > app.py.edit <<'EOF'
<<<<<<< SEARCH
    return name.strip()
=======
    return (name.strip()
>>>>>>> REPLACE
EOF"#);
    assert_eq!(out.status.code(), Some(1), "cat must fail");
    assert!(m.ok("cat app.py").contains("    return name.strip()\n"));
    let status = m.ok("cat app.py.status");
    assert!(status.contains("error (syntax): "), "{status}");
    assert!(status.contains("line 2, column 12"), "{status}");
}

#[test]
fn a_multi_file_transaction_checks_each_file_and_writes_none_if_one_breaks() {
    let m = mount!();
    let out = m.sh(r#"cat > .editfs/edit <<'EOF'
util.js
<<<<<<< SEARCH
  return a;
=======
  return a * 2;
>>>>>>> REPLACE

app.py
<<<<<<< SEARCH
    print("Hello, " + name)
=======
    print("Hello, " + name
>>>>>>> REPLACE
EOF"#);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(m.src_file("app.py"), APP.as_bytes());
    assert!(m.ok("cat util.js").contains("return a;"), "all or nothing");
    let status = m.ok("cat app.py.status");
    assert!(status.contains("error (syntax)"), "{status}");
    assert!(
        status.contains("the `(` on line 2 is never closed"),
        "{status}"
    );
}
