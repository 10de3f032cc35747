//! Payloads as agents really send them, imperfect in the ways they usually are:
//! fenced with a language tag, CRLF files, placeholders for kept code, escaped
//! on their way, patches with git's and diff's extra lines. Each must end in the
//! edit the agent meant, or in a failure that says why: never in a success that
//! wrote something else.

use editfs_engine::{Options, Outcome, Report, apply};

struct Run {
    content: String,
    written: bool,
    report: Report,
}

fn run(file: &str, payload: &str) -> Run {
    let edit = apply(
        "f",
        Some(file.as_bytes()),
        payload.as_bytes(),
        &Options::default(),
    );
    let written = edit.content.is_some();
    let content = match edit.content {
        Some(c) => String::from_utf8(c).unwrap(),
        None => file.to_owned(),
    };
    Run {
        content,
        written,
        report: edit.report,
    }
}

fn block(search: &str, replace: &str) -> String {
    format!("<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n")
}

fn kind(r: &Run) -> &str {
    r.report.error.as_ref().map_or("", |e| e.kind.as_str())
}

/// The report's whole text, for what it must name.
fn said(r: &Run) -> String {
    r.report.to_string()
}

fn refused(r: &Run) {
    assert_ne!(r.report.outcome, Outcome::Ok, "{}", said(r));
    assert!(!r.written);
}

const PY_CRLF: &str = "import os\r\n\r\ndef load(path):\r\n    \"\"\"Read the file.\"\"\"\r\n    with open(path) as f:\r\n        return f.read()\r\n";

#[test]
fn a_fenced_python_block_with_prose_edits_a_crlf_file_and_keeps_it_crlf() {
    let payload = format!(
        "Sure! Here is the fix:\n\n```python\n{}```\n\nThis handles encodings.\n",
        block(
            "    with open(path) as f:\n        return f.read()\n",
            "    with open(path, encoding=\"utf-8\") as f:\n        return f.read()\n"
        )
    );
    let r = run(PY_CRLF, &payload);
    assert_eq!(
        r.content,
        PY_CRLF.replace("open(path)", "open(path, encoding=\"utf-8\")")
    );
    assert_eq!(r.report.notes.len(), 1, "{}", said(&r));
}

#[test]
fn a_payload_sent_with_crlf_line_ends_edits_an_lf_file_in_lf() {
    let file = "fn main() {\n    println!(\"hi\");\n}\n";
    let payload =
        block("    println!(\"hi\");\n", "    println!(\"hello\");\n").replace('\n', "\r\n");
    let r = run(file, &payload);
    assert_eq!(r.content, "fn main() {\n    println!(\"hello\");\n}\n");
}

#[test]
fn placeholder_comments_in_replace_are_refused_in_each_language() {
    let python = "def total(items):\n    \"\"\"Sum the prices.\"\"\"\n    s = 0\n    for i in items:\n        s += i.price\n    return s\n";
    let rust = "fn total(items: &[Item]) -> u64 {\n    let mut s = 0;\n    for i in items {\n        s += i.price;\n    }\n    s\n}\n";
    let js = "function total(items) {\n  let s = 0;\n  for (const i of items) {\n    s += i.price;\n  }\n  return s;\n}\n";
    let cases = [
        (
            python,
            "def total(items):\n    \"\"\"Sum the prices.\"\"\"\n    s = 0\n    for i in items:\n        s += i.price\n    return s\n",
            "def total(items, tax=0):\n    # ... rest of the function unchanged\n    return s * (1 + tax)\n",
        ),
        (
            rust,
            "fn total(items: &[Item]) -> u64 {\n    let mut s = 0;\n    for i in items {\n        s += i.price;\n    }\n    s\n}\n",
            "fn total(items: &[Item]) -> u64 {\n    // ... existing code ...\n    s * 2\n}\n",
        ),
        (
            js,
            "function total(items) {\n  let s = 0;\n  for (const i of items) {\n    s += i.price;\n  }\n  return s;\n}\n",
            "function total(items) {\n  /* ... */\n  return Math.round(s);\n}\n",
        ),
        (
            python,
            "    s = 0\n    for i in items:\n        s += i.price\n    return s\n",
            "    …\n    return round(s, 2)\n",
        ),
    ];
    for (file, search, replace) in cases {
        let r = run(file, &block(search, replace));
        refused(&r);
        assert_eq!(kind(&r), "placeholder", "{}", said(&r));
    }
}

#[test]
fn placeholder_comments_naming_what_they_keep_in_any_words_are_refused() {
    let yaml = "steps:\n  - checkout\n  - build\n  - test\n  - deploy\n";
    let ts = "function f() {\n  a();\n  b();\n  c();\n}\n";
    let py = "class A:\n    def a(self):\n        return 1\n    def b(self):\n        return 2\n    def c(self):\n        return 3\n";
    let cases = [
        (yaml, "  # remaining steps unchanged"),
        (yaml, "  # other steps unchanged"),
        (yaml, "  # (other steps unchanged)"),
        (yaml, "  # rest of steps"),
        (ts, "  // no changes below"),
        (ts, "  // no other changes"),
        (ts, "  // as before"),
        (ts, "  // leave as is"),
        (ts, "  // code continues..."),
        (py, "    # methods b and c unchanged"),
    ];
    for (file, placeholder) in cases {
        // SEARCH: the whole file; REPLACE: its first line, the placeholder, its last line.
        let lines: Vec<&str> = file.lines().collect();
        let first = lines[0];
        let last = lines[lines.len() - 1];
        let r = run(
            file,
            &block(file, &format!("{first}\n{placeholder}\n{last}\n")),
        );
        refused(&r);
        assert_eq!(kind(&r), "placeholder", "{placeholder}: {}", said(&r));
    }
}

#[test]
fn a_python_stub_body_of_ellipsis_is_code_not_a_placeholder() {
    let file = "class Store(Protocol):\n    def get(self, key: str) -> bytes:\n        raise NotImplementedError\n";
    let r = run(
        file,
        &block("        raise NotImplementedError\n", "        ...\n"),
    );
    assert_eq!(
        r.content,
        "class Store(Protocol):\n    def get(self, key: str) -> bytes:\n        ...\n"
    );
}

#[test]
fn a_payload_escaped_as_one_json_string_is_rejected_naming_it() {
    let file = "x = 1\n";
    let escaped = block("x = 1\n", "x = 2\n").replace('\n', "\\n");
    let r = run(file, &escaped);
    refused(&r);
    assert!(said(&r).contains("JSON string"), "{}", said(&r));
}

#[test]
fn a_payload_escaped_for_html_is_rejected_naming_it() {
    let file = "if a < b:\n    pass\n";
    let html = block("if a < b:\n", "if a <= b:\n")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let r = run(file, &html);
    refused(&r);
    assert!(said(&r).contains("HTML"), "{}", said(&r));
}

#[test]
fn html_entities_inside_a_block_fail_and_the_hint_names_them() {
    let file = "if a < b and c > d:\n    swap()\n";
    let r = run(
        file,
        &block(
            "if a &lt; b and c &gt; d:\n",
            "if a &lt;= b and c &gt; d:\n",
        ),
    );
    refused(&r);
    assert!(said(&r).contains("HTML"), "{}", said(&r));
}

#[test]
fn an_escaped_unified_diff_is_rejected_naming_it() {
    let file = "a\nb\n";
    let diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n".replace('\n', "\\n");
    let r = run(file, &diff);
    refused(&r);
    assert!(said(&r).contains("JSON string"), "{}", said(&r));
}

#[test]
fn a_git_diff_with_index_lines_and_no_final_newline_keeps_the_file_without_one() {
    let file = "[package]\nname = \"demo\"\nversion = \"0.1.0\"";
    let diff = "diff --git a/Cargo.toml b/Cargo.toml\nindex 4f2c1a3..8b9d0e7 100644\n--- a/Cargo.toml\n+++ b/Cargo.toml\n@@ -1,3 +1,3 @@\n [package]\n name = \"demo\"\n-version = \"0.1.0\"\n\\ No newline at end of file\n+version = \"0.2.0\"\n\\ No newline at end of file\n";
    let r = run(file, diff);
    assert_eq!(r.content, "[package]\nname = \"demo\"\nversion = \"0.2.0\"");
}

#[test]
fn a_diff_u_with_timestamps_applies_to_a_markdown_file() {
    let file = "# Tool\n\n## Install\n\nRun `make`.\n\n## Usage\n\nRun `tool`.\n";
    let diff = "--- README.md\t2024-03-01 12:00:00.000000000 +0100\n+++ README.md.new\t2024-03-01 12:05:00.000000000 +0100\n@@ -3,4 +3,4 @@\n ## Install\n \n-Run `make`.\n+Run `make install`.\n \n";
    let r = run(file, diff);
    assert_eq!(
        r.content,
        file.replace("Run `make`.", "Run `make install`.")
    );
}

#[test]
fn a_fenced_diff_with_prose_around_it_applies() {
    let file = "def f():\n    return 1\n";
    let payload = "Here's the patch:\n\n```diff\n--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n```\n\nLet me know if you need more.\n";
    let r = run(file, payload);
    assert_eq!(r.content, "def f():\n    return 2\n");
}

#[test]
fn a_hunk_whose_header_undercounts_its_lines_applies_every_line_or_none() {
    let file = "def f():\n    a = 1\n    b = 2\n    return a + b\n";
    // The header counts 2 old and 2 new lines; the hunk has 4 and 4.
    let diff = "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\n def f():\n     a = 1\n-    b = 2\n+    b = 3\n     return a + b\n";
    let r = run(file, diff);
    assert_eq!(
        r.content,
        "def f():\n    a = 1\n    b = 3\n    return a + b\n",
        "{}",
        said(&r)
    );
}

#[test]
fn a_hunk_whose_header_overcounts_before_the_next_hunk_applies_both() {
    let file = "a\nb\nc\nd\ne\nf\ng\nh\n";
    let diff = "--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n a\n-b\n+B\n@@ -6,3 +6,3 @@\n f\n-g\n+G\n h\n";
    let r = run(file, diff);
    assert_eq!(r.content, "a\nB\nc\nd\ne\nf\nG\nh\n", "{}", said(&r));
}

#[test]
fn apply_patch_context_header_on_several_lines_places_a_hunk_only_one_of_them_leads_to() {
    // argparse has `def _fill_text(self, text, width, indent):` twice; the line the
    // hunk changes is also in `_split_lines` above the first, and only the first
    // `_fill_text` is followed by it. Codex's tool applies it there, and so do we.
    let file = "class H:\n    def split(self, text):\n        text = clean(text)\n        return wrap(text)\n\n    def fill(self, text):\n        text = clean(text)\n        return fill(text)\n\n\nclass R(H):\n    def fill(self, text):\n        return text\n";
    let patch = "*** Begin Patch\n*** Update File: f.py\n@@ def fill(self, text):\n-        text = clean(text)\n+        text = clean(text, keep=True)\n*** End Patch\n";
    let r = run(file, patch);
    assert_eq!(
        r.content,
        file.replacen(
            "    def fill(self, text):\n        text = clean(text)",
            "    def fill(self, text):\n        text = clean(text, keep=True)",
            1
        ),
        "{}",
        said(&r)
    );
    // When the header's lines lead to different matches, the hunk stays ambiguous.
    let file = "def f():\n    x = 1\n\ndef f():\n    x = 1\n";
    let patch = "*** Begin Patch\n*** Update File: f.py\n@@ def f():\n-    x = 1\n+    x = 2\n*** End Patch\n";
    let r = run(file, patch);
    assert_eq!(
        r.report.error.as_ref().map(|e| e.kind.as_str()),
        Some("ambiguous"),
        "{}",
        said(&r)
    );
}

#[test]
fn apply_patch_context_headers_pick_the_function_whose_lines_repeat() {
    let file = "def load(path):\n    data = read(path)\n    return parse(data)\n\n\ndef reload(path):\n    data = read(path)\n    return parse(data)\n";
    let patch = "*** Begin Patch\n*** Update File: f.py\n@@ def reload(path):\n     data = read(path)\n-    return parse(data)\n+    return parse(data, fresh=True)\n*** End Patch\n";
    let r = run(file, patch);
    assert_eq!(
        r.content,
        file.replacen(
            "def reload(path):\n    data = read(path)\n    return parse(data)",
            "def reload(path):\n    data = read(path)\n    return parse(data, fresh=True)",
            1
        ),
        "{}",
        said(&r)
    );
}

#[test]
fn a_markdown_block_holding_a_code_fence_edits_the_fence_content() {
    let file = "# Use\n\n```sh\nmake\n```\n\nDone.\n";
    let payload = format!(
        "```markdown\n{}```\n",
        block("```sh\nmake\n```\n", "```sh\nmake install\n```\n")
    );
    let r = run(file, &payload);
    assert_eq!(
        r.content,
        "# Use\n\n```sh\nmake install\n```\n\nDone.\n",
        "{}",
        said(&r)
    );
}

#[test]
fn an_rst_file_with_underlines_in_both_search_and_replace() {
    let file = "Usage\n=====\n\nRun it.\n\nOptions\n=======\n\n-v  verbose\n";
    let payload = "<<<<<<< SEARCH\nOptions\n=======\n\n-v  verbose\n=======\nOptions\n=======\n\n-v  verbose\n-q  quiet\n>>>>>>> REPLACE\n";
    let r = run(file, payload);
    assert_eq!(
        r.content,
        "Usage\n=====\n\nRun it.\n\nOptions\n=======\n\n-v  verbose\n-q  quiet\n",
        "{}",
        said(&r)
    );
}

#[test]
fn context_lines_that_lost_their_leading_space_are_still_context() {
    let file = "def f():\n    return 1\n";
    let diff = "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,2 @@\ndef f():\n-    return 1\n+    return 2\n";
    let r = run(file, diff);
    assert_eq!(r.content, "def f():\n    return 2\n", "{}", said(&r));
}

#[test]
fn a_diff_cut_off_inside_a_hunk_changes_nothing() {
    let file = "a\nb\nc\nd\n";
    let diff = "--- a/x\n+++ b/x\n@@ -1,4 +1,4 @@\n a\n-b\n+B\n c\n";
    let r = run(file, diff);
    refused(&r);
    assert!(said(&r).contains("ends early"), "{}", said(&r));
}

#[test]
fn a_hunk_that_also_adds_a_final_newline_says_the_ending_is_kept() {
    let file = "a\nold";
    let diff = "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-old\n\\ No newline at end of file\n+new\n";
    let r = run(file, diff);
    assert_eq!(r.content, "a\nnew");
    assert!(
        said(&r).contains("changes whether the file ends with a newline"),
        "{}",
        said(&r)
    );
    // Both sides without one: nothing to say.
    let same = diff.replace("+new\n", "+new\n\\ No newline at end of file\n");
    let r = run(file, &same);
    assert_eq!(r.content, "a\nnew");
    assert!(!said(&r).contains("ends with a newline"), "{}", said(&r));
}

#[test]
fn cdata_around_roo_code_search_and_replace_values_is_not_written() {
    let file = "<ul>\n  <li>{i}</li>\n</ul>\n";
    let call = "<search_and_replace>\n<path>c.tsx</path>\n<search><![CDATA[{i}</li>]]></search>\n<replace><![CDATA[{i.trim()}</li>]]></replace>\n</search_and_replace>\n";
    let edit = apply(
        "c.tsx",
        Some(file.as_bytes()),
        call.as_bytes(),
        &Options::default(),
    );
    assert_eq!(edit.report.outcome, Outcome::Ok, "{}", edit.report);
    assert_eq!(
        edit.content.as_deref(),
        Some("<ul>\n  <li>{i.trim()}</li>\n</ul>\n".as_bytes())
    );
}

/// Placeholders an agent words in its own way, each standing where two or more
/// SEARCH lines vanish: in code, inside a comment block, inside a docstring.
#[test]
fn a_placeholder_in_any_words_standing_for_dropped_lines_is_refused() {
    let py = "def area(r):\n    \"\"\"Area of a circle.\"\"\"\n    pi = 3.14159\n    return pi * r * r\n";
    let py_doc = "def parse(text):\n    \"\"\"Parse the text.\n\n    Lines starting with # are skipped.\n    Blank lines end a section.\n    \"\"\"\n    return [l for l in text.splitlines() if l]\n";
    let js = "// Config loader.\n// Reads JSON from disk and caches it.\nconst fs = require(\"fs\");\nconst cache = new Map();\n\nfunction load(p) {\n  return JSON.parse(fs.readFileSync(p, \"utf8\"));\n}\n";
    let ts = "export class Api {\n  get(id: string): Item;\n  get(id: number): Item;\n  get(id: unknown): Item {\n    return this.items[String(id)];\n  }\n}\n";
    let rs = "fn checksum(data: &[u8]) -> u32 {\n    let mut sum = 0u32;\n    for b in data {\n        sum = sum.wrapping_add(u32::from(*b));\n    }\n    sum\n}\n";
    let go = "func (c *Config) Validate() error {\n\tif c.Port == 0 {\n\t\treturn errNoPort\n\t}\n\tif c.Host == \"\" {\n\t\treturn errNoHost\n\t}\n\treturn nil\n}\n";
    let c = "int classify(int c) {\n    switch (c) {\n    case 'a': return 1;\n    case 'b': return 2;\n    default: return 0;\n    }\n}\n";
    let cases = [
        (
            py,
            py,
            "def area(r, exact=False):\n    # TODO: keep the original body here\n",
        ),
        (
            py_doc,
            py_doc,
            "def parse(text, strict=False):\n    \"\"\"Parse the text.\n\n    ...\n    \"\"\"\n    return [l for l in text.splitlines() if l]\n",
        ),
        (
            py_doc,
            "    \"\"\"Parse the text.\n\n    Lines starting with # are skipped.\n    Blank lines end a section.\n    \"\"\"\n",
            "    \"\"\"Parse the text strictly.\n\n    ...\n    Raises ValueError on a bad line.\n    \"\"\"\n",
        ),
        (
            py_doc,
            "    Lines starting with # are skipped.\n    Blank lines end a section.\n    \"\"\"\n",
            "    (rest of the docstring unchanged)\n    \"\"\"\n",
        ),
        (
            js,
            "// Config loader.\n// Reads JSON from disk and caches it.\nconst fs = require(\"fs\");\nconst cache = new Map();\n",
            "// Config loader.\n// rest of the code stays the same\n",
        ),
        (
            ts,
            "  get(id: string): Item;\n  get(id: number): Item;\n  get(id: unknown): Item {\n",
            "  // the other overloads are kept as they were\n  get(id: unknown): Item {\n",
        ),
        (
            rs,
            rs,
            "fn checksum(data: &[u8]) -> u32 {\n    // body kept from the original version\n}\n",
        ),
        (
            go,
            go,
            "func (c *Config) Validate() error {\n\t// TODO: original validation stays as it was\n\treturn nil\n}\n",
        ),
        (
            c,
            "    case 'a': return 1;\n    case 'b': return 2;\n    default: return 0;\n",
            "    case 'a': return 10;\n    /* the remaining cases are handled exactly as before */\n",
        ),
    ];
    assert_refused_as_placeholders(&cases);
}

/// Fails naming every case (file, SEARCH, REPLACE) that was written or
/// refused for another reason than a placeholder.
fn assert_refused_as_placeholders(cases: &[(&str, &str, &str)]) {
    let passed: Vec<String> = cases
        .iter()
        .map(|(file, search, replace)| (replace, run(file, &block(search, replace))))
        .filter(|(_, r)| r.written || kind(r) != "placeholder")
        .map(|(replace, r)| format!("{replace}: {}", said(&r)))
        .collect();
    assert!(passed.is_empty(), "not refused:\n{}", passed.join("\n"));
}

/// A placeholder after code on its own line (`pass  # unchanged`, `...  #
/// rest unchanged`, `todo!() // existing code`) stands for the lines it
/// drops as much as one on a line of its own.
#[test]
fn a_placeholder_comment_after_code_standing_for_dropped_lines_is_refused() {
    let py =
        "def f(a, b):\n    x = a + b\n    y = x * 2\n    z = y - 1\n    w = z + 3\n    return w\n";
    let rs = "fn g(v: &[u32]) -> u32 {\n    let a = v[0];\n    let b = v[1];\n    let c = a + b;\n    c * 2\n}\n";
    let js =
        "function h(o) {\n  const a = o.a;\n  const b = o.b;\n  const c = a + b;\n  return c;\n}\n";
    let search_py = "    x = a + b\n    y = x * 2\n    z = y - 1\n    w = z + 3\n";
    let search_rs = "    let a = v[0];\n    let b = v[1];\n    let c = a + b;\n    c * 2\n";
    let search_js = "  const a = o.a;\n  const b = o.b;\n  const c = a + b;\n  return c;\n";
    let cases = [
        (py, search_py, "    x = a - b\n    ...  # rest unchanged\n"),
        (
            py,
            search_py,
            "    x = a - b  # rest of the code unchanged\n",
        ),
        (py, search_py, "    pass  # existing code\n"),
        (rs, search_rs, "    todo!() // existing code\n"),
        (rs, search_rs, "    let a = v[0] + 1; // rest unchanged\n"),
        (
            js,
            search_js,
            "  const a = o.a * 2; // ... rest of the function unchanged\n",
        ),
    ];
    assert_refused_as_placeholders(&cases);
}

/// What looks like a placeholder but is content, or stands for fewer than two
/// dropped lines: a doctest's continuation lines, an `Ellipsis` body, a spread,
/// a range, and comments that explain the new code beside them.
#[test]
fn ellipses_that_are_content_and_comments_beside_new_code_still_apply() {
    let py = "def total(xs):\n    \"\"\"Sum xs.\n\n    >>> total([1, 2])\n    3\n    \"\"\"\n    return sum(xs)\n";
    let py_stub = "class Store:\n    def get(self, key):\n        data = self.read(key)\n        return data\n";
    let js = "function call(f, a, b) {\n  const args = [a, b];\n  return f.apply(null, args);\n}\n";
    let rs = "fn first(v: &[u32]) -> u32 {\n    let mut s = 0;\n    s += v[0];\n    s\n}\n";
    let go = "func sortNames(xs []string) {\n\tsort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })\n}\n";
    let c = "int check(const char *p) {\n    if (p == NULL) return -1;\n    if (*p == 0) return -1;\n    return 0;\n}\n";
    let cases = [
        (
            py,
            "    >>> total([1, 2])\n    3\n    \"\"\"\n",
            "    >>> for n in range(2):\n    ...     total([n])\n    ...\n    0\n    1\n    \"\"\"\n",
            "    >>> for n in range(2):\n    ...     total([n])\n    ...\n    0\n    1\n    \"\"\"\n",
        ),
        (
            py_stub,
            "    def get(self, key):\n        data = self.read(key)\n        return data\n",
            "    def get(self, key): ...\n",
            "    def get(self, key): ...\n",
        ),
        (
            js,
            "function call(f, a, b) {\n  const args = [a, b];\n  return f.apply(null, args);\n}\n",
            "function call(f, ...args) {\n  return f(...args);\n}\n",
            "function call(f, ...args) {\n  return f(...args);\n}\n",
        ),
        (
            rs,
            "    let mut s = 0;\n    s += v[0];\n    s\n",
            "    v[..1].iter().sum()\n",
            "    v[..1].iter().sum()\n",
        ),
        (
            go,
            "\tsort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })\n",
            "\t// keep the original order of equal names\n\tsort.SliceStable(xs, func(i, j int) bool { return xs[i] < xs[j] })\n",
            "\t// keep the original order of equal names\n\tsort.SliceStable(xs, func(i, j int) bool { return xs[i] < xs[j] })\n",
        ),
        (
            c,
            "    if (p == NULL) return -1;\n    if (*p == 0) return -1;\n",
            "    /* the same two checks, in one place */\n    if (p == NULL || *p == 0) return -1;\n",
            "    /* the same two checks, in one place */\n    if (p == NULL || *p == 0) return -1;\n",
        ),
        (
            c,
            "    if (p == NULL) return -1;\n    if (*p == 0) return -1;\n",
            "    if (p == NULL || *p == 0) return -1; // both checks in one\n",
            "    if (p == NULL || *p == 0) return -1; // both checks in one\n",
        ),
        (
            rs,
            "    let mut s = 0;\n    s += v[0];\n    s\n",
            "    v[0] // the sum of one element is the element\n",
            "    v[0] // the sum of one element is the element\n",
        ),
    ];
    let refused: Vec<String> = cases
        .iter()
        .map(|(file, search, replace, written)| {
            let r = run(file, &block(search, replace));
            (replace, r.content == file.replacen(search, written, 1), r)
        })
        .filter(|(_, right, r)| !right || r.report.outcome != Outcome::Ok)
        .map(|(replace, _, r)| format!("{replace}: {}", said(&r)))
        .collect();
    assert!(refused.is_empty(), "not applied:\n{}", refused.join("\n"));
}
