//! Other edit tools' calls, sent through a real mount as those tools' agents send
//! them: the call written as it is to `F.edit` or `.editfs/edit`, the file then
//! checked byte for byte. The examples follow each tool's documentation, in our
//! own words and files.

use crate::common;

use std::fs;
use std::path::Path;

use common::Mount;

const CONFIG: &str = "// settings\nconst API_KEY_OLD = load(\"API_KEY_OLD\");\nexport const key = API_KEY_OLD;\n\nfunction rotate() {\n  return API_KEY_OLD + \"-next\";\n}\n";

const SHOP: &str = "class Cart:\n    def total(self):\n        return sum(i.price for i in self.items)\n\n    def count(self):\n        return len(self.items)\n";

fn project(src: &Path) {
    fs::create_dir(src.join("src")).unwrap();
    fs::write(src.join("src/config.js"), CONFIG).unwrap();
    fs::write(src.join("shop.py"), SHOP).unwrap();
    fs::create_dir(src.join("notes d'été")).unwrap();
    fs::write(src.join("notes d'été/à faire.md"), "- acheter du pain\n").unwrap();
}

macro_rules! mount {
    () => {
        match Mount::start(&[], project) {
            Some(m) => m,
            None => return,
        }
    };
}

/// A shell command that writes `payload` to `control` as an agent's heredoc does.
fn send(control: &str, payload: &str) -> String {
    format!("cat > '{control}' <<'PAYLOAD_END'\n{payload}\nPAYLOAD_END")
}

fn text(m: &Mount, rel: &str) -> String {
    String::from_utf8(m.src_file(rel)).unwrap()
}

#[test]
fn roo_search_and_replace_xml_replaces_every_match_literally() {
    let m = mount!();
    let call = "<search_and_replace>\n<path>src/config.js</path>\n<search>API_KEY_OLD</search>\n<replace>API_KEY_NEW</replace>\n</search_and_replace>";
    m.ok(&send("src/config.js.edit", call));
    assert_eq!(
        text(&m, "src/config.js"),
        CONFIG.replace("API_KEY_OLD", "API_KEY_NEW")
    );
    let status = m.ok("cat src/config.js.status");
    assert!(status.starts_with("OK src/config.js"), "{status}");
    assert!(
        status.contains("read as the XML call of Roo Code's search_and_replace"),
        "{status}"
    );
    // A literal search: the dot is no pattern.
    let call = "<search_and_replace>\n<path>src/config.js</path>\n<search>i.price</search>\n<replace>i.cost</replace>\n</search_and_replace>";
    let out = m.sh(&send("src/config.js.edit", call));
    assert!(
        !out.status.success(),
        "nothing matches the literal `i.price` in config.js"
    );
}

#[test]
fn roo_search_and_replace_xml_regex_case_and_line_range_with_javascript_tokens() {
    let m = mount!();
    let call = "<search_and_replace>\n<path>src/config.js</path>\n<search>api_key_(?<age>old)</search>\n<replace>[$&, $<age>]</replace>\n<use_regex>true</use_regex>\n<ignore_case>true</ignore_case>\n<start_line>3</start_line>\n<end_line>6</end_line>\n</search_and_replace>";
    m.ok(&send(".editfs/edit", call));
    let want = CONFIG
        .replace("key = API_KEY_OLD;", "key = [API_KEY_OLD, OLD];")
        .replace("return API_KEY_OLD +", "return [API_KEY_OLD, OLD] +");
    assert_eq!(text(&m, "src/config.js"), want);
    let call = "<search_and_replace>\n<path>src/config.js</path>\n<search>load\\(\"(\\w+)\"\\)</search>\n<replace>env(\"$1\", \"$$HOME\")</replace>\n<use_regex>true</use_regex>\n</search_and_replace>";
    m.ok(&send("src/config.js.edit", call));
    assert!(
        text(&m, "src/config.js").contains("= env(\"API_KEY_OLD\", \"$HOME\");\n"),
        "{}",
        text(&m, "src/config.js")
    );
}

#[test]
fn roo_search_and_replace_json_arguments_with_strings() {
    let m = mount!();
    let args = r#"{"path": "src/config.js", "search": "API_KEY_OLD", "replace": "KEY", "use_regex": "false", "ignore_case": "false", "start_line": "5", "end_line": "10"}"#;
    m.ok(&format!("printf '%s' '{args}' | cat > src/config.js.edit"));
    assert_eq!(
        text(&m, "src/config.js"),
        CONFIG.replace("return API_KEY_OLD", "return KEY")
    );
    let json: serde_json::Value =
        serde_json::from_str(&m.ok("cat src/config.js.status.json")).unwrap();
    assert_eq!(json["outcome"], "ok");
    assert!(
        json["notes"][0].as_str().unwrap().contains("Roo Code"),
        "{json}"
    );
}

#[test]
fn cline_replace_in_file_xml_to_the_file_and_to_the_state_directory() {
    let m = mount!();
    let call = "<replace_in_file>\n<path>shop.py</path>\n<diff>\n------- SEARCH\n    def count(self):\n        return len(self.items)\n=======\n    def count(self):\n        return sum(i.qty for i in self.items)\n+++++++ REPLACE\n</diff>\n</replace_in_file>";
    m.ok(&send("shop.py.edit", call));
    let counted = SHOP.replace(
        "return len(self.items)",
        "return sum(i.qty for i in self.items)",
    );
    assert_eq!(text(&m, "shop.py"), counted);
    assert!(
        m.ok("cat shop.py.status")
            .contains("Cline's replace_in_file")
    );
    // In .editfs/edit the <path> names the file; a new file's <diff> is no path.
    let call = "<replace_in_file>\n<path>src/new.js</path>\n<diff>\n------- SEARCH\n=======\nexport {};\n+++++++ REPLACE\n</diff>\n</replace_in_file>";
    m.ok(&send(".editfs/edit", call));
    assert_eq!(text(&m, "src/new.js"), "export {};\n");
    assert!(!m.src.join("<diff>").exists());
    assert!(!m.src.join("src/<diff>").exists());
}

#[test]
fn cline_json_arguments_path_and_diff() {
    let m = mount!();
    let args = serde_json::json!({
        "path": "shop.py",
        "diff": "------- SEARCH\n    def total(self):\n=======\n    def total(self) -> float:\n+++++++ REPLACE",
    });
    fs::write(m.src.join("../args.json"), args.to_string()).unwrap();
    m.ok("cat ../args.json > shop.py.edit");
    assert_eq!(
        text(&m, "shop.py"),
        SHOP.replace("def total(self):", "def total(self) -> float:")
    );
}

#[test]
fn cline_interrupted_last_block_applies_nothing_and_names_the_complete_blocks() {
    let m = mount!();
    let call = "<replace_in_file>\n<path>shop.py</path>\n<diff>\n------- SEARCH\nclass Cart:\n=======\nclass Basket:\n+++++++ REPLACE\n------- SEARCH\n    def count(self):\n=======\n    def size(se";
    let out = m.sh(&send("shop.py.edit", call));
    assert_eq!(out.status.code(), Some(1), "cat fails with EINVAL");
    assert_eq!(text(&m, "shop.py"), SHOP);
    let status = m.ok("cat shop.py.status");
    assert!(status.starts_with("REJECTED shop.py"), "{status}");
    assert!(
        status.contains("block 1 before it was complete, but nothing was applied"),
        "{status}"
    );
    assert!(
        status.contains("`+++++++ REPLACE` after the new text"),
        "{status}"
    );
}

#[test]
fn vibe_search_replace_arguments_file_path_and_content() {
    let m = mount!();
    let args = serde_json::json!({
        "file_path": "shop.py",
        "content": "<<<<<<< SEARCH\nclass Cart:\n=======\nclass Cart(Base):\n>>>>>>> REPLACE\n<<<<<<< SEARCH\n        return len(self.items)\n=======\n        return len(self.items or [])\n>>>>>>> REPLACE",
    });
    fs::write(m.src.join("../args.json"), args.to_string()).unwrap();
    m.ok("cat ../args.json > shop.py.edit");
    let want = SHOP
        .replace("class Cart:", "class Cart(Base):")
        .replace("len(self.items)", "len(self.items or [])");
    assert_eq!(text(&m, "shop.py"), want);
    assert!(m.ok("cat shop.py.status").contains("Mistral Vibe"));
}

#[test]
fn desktop_commander_edit_block_with_absolute_paths_and_counts() {
    let m = mount!();
    let abs = m.mnt.join("src/config.js");
    let args = serde_json::json!({
        "file_path": abs,
        "old_string": "API_KEY_OLD",
        "new_string": "SECRET",
        "expected_replacements": 4,
    });
    fs::write(m.src.join("../args.json"), args.to_string()).unwrap();
    m.ok("cat ../args.json > .editfs/edit");
    assert_eq!(
        text(&m, "src/config.js"),
        CONFIG.replace("API_KEY_OLD", "SECRET")
    );
    assert!(
        m.ok("cat .editfs/status")
            .contains("Desktop Commander's edit_block")
    );
    // A count that does not hold changes nothing.
    let args = serde_json::json!({
        "file_path": abs,
        "old_string": "SECRET",
        "new_string": "KEY",
        "expected_replacements": 1,
    });
    fs::write(m.src.join("../args.json"), args.to_string()).unwrap();
    assert!(
        !m.sh("cat ../args.json > src/config.js.edit")
            .status
            .success()
    );
    assert_eq!(
        text(&m, "src/config.js"),
        CONFIG.replace("API_KEY_OLD", "SECRET")
    );
    // The older blockContent form: the path on the first line, through SOURCE this time.
    let block = format!(
        "{}\n<<<<<<< SEARCH\n// settings\n=======\n// settings (rotated)\n>>>>>>> REPLACE",
        m.src.join("src/config.js").display()
    );
    let args = serde_json::json!({ "blockContent": block });
    fs::write(m.src.join("../args.json"), args.to_string()).unwrap();
    m.ok("cat ../args.json > .editfs/edit");
    assert!(text(&m, "src/config.js").starts_with("// settings (rotated)\n"));
}

/// The XML form models write their tool calls in as text, `<invoke>` with one
/// `<parameter>` per argument, pasted as it is: to a file's control file, a
/// text editor `str_replace` (its values on lines of their own, the indentation
/// of their lines kept); to the state directory's, calls for two files.
#[test]
fn invoke_xml_function_calls_are_read_as_the_tool_calls_they_stand_for() {
    let m = mount!();
    let call = "<function_calls>\n<invoke name=\"str_replace_based_edit_tool\">\n<parameter name=\"command\">str_replace</parameter>\n<parameter name=\"path\">shop.py</parameter>\n<parameter name=\"old_str\">\n    def count(self):\n        return len(self.items)\n</parameter>\n<parameter name=\"new_str\">\n    def count(self):\n        return sum(1 for _ in self.items)\n</parameter>\n</invoke>\n</function_calls>";
    m.ok(&send("shop.py.edit", call));
    assert_eq!(
        text(&m, "shop.py"),
        SHOP.replace(
            "return len(self.items)",
            "return sum(1 for _ in self.items)"
        )
    );
    let two = "<invoke name=\"edit_block\">\n<parameter name=\"file_path\">src/config.js</parameter>\n<parameter name=\"old_string\">export const key = API_KEY_OLD;</parameter>\n<parameter name=\"new_string\">export const key = API_KEY_OLD.trim();</parameter>\n</invoke>\n<invoke name=\"MultiEdit\">\n<parameter name=\"file_path\">notes d'été/à faire.md</parameter>\n<parameter name=\"edits\">[{\"old_string\": \"pain\", \"new_string\": \"pain et du lait\"}]</parameter>\n</invoke>";
    let report = m.ok(&format!(
        "{}\ncat .editfs/status",
        send(".editfs/edit", two)
    ));
    assert!(
        report.contains("read each <invoke> XML function call"),
        "{report}"
    );
    assert!(text(&m, "src/config.js").contains("export const key = API_KEY_OLD.trim();"));
    assert_eq!(
        text(&m, "notes d'été/à faire.md"),
        "- acheter du pain et du lait\n"
    );
}

#[test]
fn a_call_naming_another_file_is_refused_naming_both() {
    let m = mount!();
    let args = r#"{"file_path": "src/config.js", "old_string": "class Cart:", "new_string": "class Basket:"}"#;
    let out = m.sh(&format!("printf '%s' '{args}' | cat > shop.py.edit"));
    assert_eq!(out.status.code(), Some(1), "close fails with EINVAL");
    assert_eq!(text(&m, "shop.py"), SHOP);
    let status = m.ok("cat shop.py.status");
    assert!(status.starts_with("REJECTED shop.py"), "{status}");
    assert!(
        status.contains("the call names `src/config.js`, but it was sent to edit shop.py"),
        "{status}"
    );
    // An absolute path through the mount that names the file itself agrees.
    let args = serde_json::json!({
        "file_path": m.mnt.join("shop.py"),
        "old_string": "class Cart:",
        "new_string": "class Basket:",
    });
    fs::write(m.src.join("../args.json"), args.to_string()).unwrap();
    m.ok("cat ../args.json > shop.py.edit");
    assert_eq!(
        text(&m, "shop.py"),
        SHOP.replace("class Cart:", "class Basket:")
    );
}

#[test]
fn a_path_outside_source_and_mount_is_refused_in_the_state_directory() {
    let m = mount!();
    let args = r#"{"file_path": "/etc/hostname", "old_string": "a", "new_string": "b"}"#;
    let out = m.sh(&format!("printf '%s' '{args}' | cat > .editfs/edit"));
    assert!(!out.status.success());
    assert!(m.ok("cat .editfs/status").contains("outside the project"));
}

#[test]
fn multi_file_path_lines_with_spaces_and_unicode_through_the_mount() {
    let m = mount!();
    let payload = "notes d'été/à faire.md\n<<<<<<< SEARCH\n- acheter du pain\n=======\n- acheter du pain\n- appeler Zoé\n>>>>>>> REPLACE\n\n\"notes d'été/idées neuves.md\"\n<<<<<<< SEARCH\n=======\n# Idées\n>>>>>>> REPLACE";
    m.ok(&send(".editfs/edit", payload));
    assert_eq!(
        text(&m, "notes d'été/à faire.md"),
        "- acheter du pain\n- appeler Zoé\n"
    );
    assert_eq!(text(&m, "notes d'été/idées neuves.md"), "# Idées\n");
}

#[test]
fn a_diff_u_patch_applies_to_its_file() {
    let m = mount!();
    let new = SHOP.replace("return len(self.items)", "return len(self.items or [])");
    fs::write(m.src.join("../shop.new"), &new).unwrap();
    m.ok(&format!(
        "diff -u shop.py {} | cat > shop.py.edit",
        m.src.join("../shop.new").display()
    ));
    assert_eq!(text(&m, "shop.py"), new);
    assert!(
        m.ok("cat shop.py.status")
            .contains("read as a unified diff: 1 hunk(s)")
    );
}

#[test]
fn git_diff_and_begin_patch_payloads_for_several_files() {
    let m = mount!();
    let diff = "diff --git a/shop.py b/shop.py\n--- a/shop.py\n+++ b/shop.py\n@@ -1,3 +1,3 @@\n-class Cart:\n+class Basket:\n     def total(self):\n         return sum(i.price for i in self.items)\ndiff --git a/src/config.js b/src/config.js\n--- a/src/config.js\n+++ b/src/config.js\n@@ -1,2 +1,2 @@\n-// settings\n+// settings, rotated monthly\n const API_KEY_OLD = load(\"API_KEY_OLD\");";
    m.ok(&send(".editfs/edit", diff));
    assert_eq!(
        text(&m, "shop.py"),
        SHOP.replace("class Cart:", "class Basket:")
    );
    assert!(text(&m, "src/config.js").starts_with("// settings, rotated monthly\nconst"));
    let patch = "*** Begin Patch\n*** Update File: shop.py\n@@ class Basket:\n     def count(self):\n-        return len(self.items)\n+        return len(self.items) or 0\n*** Add File: src/util.js\n+export const two = 2;\n*** End Patch";
    m.ok(&send(".editfs/edit", patch));
    assert!(text(&m, "shop.py").ends_with("return len(self.items) or 0\n"));
    assert_eq!(text(&m, "src/util.js"), "export const two = 2;\n");
}

#[test]
fn an_apply_patch_that_deletes_and_moves_files_through_the_mount_and_its_undo() {
    let m = mount!();
    // The mount has looked at both files before, so stale cache would show.
    m.ok("cat shop.py src/config.js > /dev/null");
    let patch = "*** Begin Patch\n*** Delete File: src/config.js\n*** Update File: shop.py\n*** Move to: src/shop.py\n@@ class Cart:\n     def count(self):\n-        return len(self.items)\n+        return len(self.items) or 0\n*** End Patch";
    m.ok(&send(".editfs/edit", patch));
    let listing = m.ok("ls . src");
    assert!(!listing.contains("config.js"), "{listing}");
    assert_eq!(
        m.ok("cat src/shop.py"),
        SHOP.replace("return len(self.items)", "return len(self.items) or 0")
    );
    assert!(!m.sh("test -e shop.py").status.success());
    let status = m.ok("cat .editfs/status");
    assert!(status.contains("#1 applied (delete)"), "{status}");
    assert!(status.contains("moved here from shop.py"), "{status}");
    // One undo of the transaction brings both back, as they were.
    let tx = m.ok("tail -n1 .editfs/log | sed 's/^{\"tx\":\\([0-9]*\\).*/\\1/'");
    m.ok(&format!("echo '--tx {}' > .editfs/undo", tx.trim()));
    assert_eq!(m.ok("cat src/config.js"), CONFIG);
    assert_eq!(m.ok("cat shop.py"), SHOP);
    assert!(!m.sh("test -e src/shop.py").status.success());
}

#[test]
fn a_git_diff_that_deletes_a_file_through_the_mount_can_be_undone_by_path() {
    let m = mount!();
    let diff = format!(
        "diff --git a/src/config.js b/src/config.js\ndeleted file mode 100644\nindex 1a2b3c4..0000000\n--- a/src/config.js\n+++ /dev/null\n@@ -1,7 +0,0 @@\n{}",
        CONFIG
            .lines()
            .map(|l| format!("-{l}\n"))
            .collect::<String>()
    );
    m.ok(&send(".editfs/edit", &diff));
    assert!(!m.sh("test -e src/config.js").status.success());
    m.ok("echo src/config.js > .editfs/undo");
    assert_eq!(m.ok("cat src/config.js"), CONFIG);
}

#[test]
fn a_delete_sent_to_a_files_own_control_file_is_refused_naming_the_multi_file_one() {
    let m = mount!();
    let patch = "*** Begin Patch\n*** Delete File: shop.py\n*** End Patch";
    let out = m.sh(&send("shop.py.edit", patch));
    assert!(!out.status.success(), "the close must fail");
    assert_eq!(text(&m, "shop.py"), SHOP);
    let status = m.ok("cat shop.py.status");
    assert!(status.starts_with("REJECTED shop.py"), "{status}");
    assert!(status.contains("error (multi_file)"), "{status}");
    assert!(
        status.contains("send the whole patch to .editfs/edit"),
        "{status}"
    );
}

#[test]
fn an_apply_patch_adds_a_file_in_a_new_directory_seen_at_once_through_the_mount() {
    let m = mount!();
    // The kernel has been told `pkg` is not there.
    assert!(!m.sh("ls pkg").status.success());
    let patch = "*** Begin Patch\n*** Add File: pkg/util/__init__.py\n+VERSION = 1\n*** Update File: shop.py\n*** Move to: pkg/shop.py\n*** End Patch";
    m.ok(&send(".editfs/edit", patch));
    assert_eq!(m.ok("cat pkg/util/__init__.py"), "VERSION = 1\n");
    assert_eq!(m.ok("cat pkg/shop.py"), SHOP);
    assert!(!m.sh("test -e shop.py").status.success());
}
