//! The languages the outcome check knows: which parser reads a file, found by
//! its name's extension or, for scripts without one, by its `#!` line.

use tree_sitter::Language;
use tree_sitter_language::LanguageFn;

/// Rules a grammar alone does not see, run beside the parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The grammar is the whole syntax.
    None,
    /// Python: blocks are made by indentation (see `layout.rs`).
    Offside,
}

/// One language: its name in reports, the parser's name, how files are known.
pub struct Lang {
    /// The name a reader knows (`Python`), used in readings and hints.
    pub name: &'static str,
    /// The parser that checks it, as a success report names it.
    pub parser: &'static str,
    extensions: &'static [&'static str],
    /// Interpreter names a `#!` line may give (`python3` counts as `python`).
    interpreters: &'static [&'static str],
    grammar: LanguageFn,
    pub layout: Layout,
    /// The grammar reads a nested item (a method, an indented function) on
    /// its own, as the window of a change may be (window.rs).
    pub nested: bool,
}

impl Lang {
    pub fn grammar(&self) -> Language {
        self.grammar.into()
    }
}

const fn lang(
    name: &'static str,
    parser: &'static str,
    extensions: &'static [&'static str],
    interpreters: &'static [&'static str],
    grammar: LanguageFn,
) -> Lang {
    Lang {
        name,
        parser,
        extensions,
        interpreters,
        grammar,
        layout: Layout::None,
        nested: true,
    }
}

/// A language whose items are read only whole: data formats, and HTML,
/// whose fragments parse as something else than in their file.
const fn whole(l: Lang) -> Lang {
    Lang { nested: false, ..l }
}

static LANGS: &[Lang] = &[
    Lang {
        layout: Layout::Offside,
        nested: false,
        ..lang(
            "Python",
            "tree-sitter-python with the indentation rules",
            &["py", "pyi", "pyw"],
            &["python"],
            tree_sitter_python::LANGUAGE,
        )
    },
    lang(
        "JavaScript",
        "tree-sitter-javascript",
        &["js", "mjs", "cjs", "jsx"],
        &["node"],
        tree_sitter_javascript::LANGUAGE,
    ),
    lang(
        "TypeScript",
        "tree-sitter-typescript",
        &["ts", "mts", "cts"],
        &[],
        tree_sitter_typescript::LANGUAGE_TYPESCRIPT,
    ),
    lang(
        "TSX",
        "tree-sitter-typescript (tsx)",
        &["tsx"],
        &[],
        tree_sitter_typescript::LANGUAGE_TSX,
    ),
    lang(
        "Rust",
        "tree-sitter-rust",
        &["rs"],
        &[],
        tree_sitter_rust::LANGUAGE,
    ),
    lang(
        "Go",
        "tree-sitter-go",
        &["go"],
        &[],
        tree_sitter_go::LANGUAGE,
    ),
    lang(
        "Java",
        "tree-sitter-java",
        &["java"],
        &[],
        tree_sitter_java::LANGUAGE,
    ),
    lang(
        "C",
        "tree-sitter-c",
        &["c", "h"],
        &[],
        tree_sitter_c::LANGUAGE,
    ),
    lang(
        "C++",
        "tree-sitter-cpp",
        &[
            "cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "h++", "ipp", "tpp",
        ],
        &[],
        tree_sitter_cpp::LANGUAGE,
    ),
    whole(lang(
        "JSON",
        "tree-sitter-json",
        &["json"],
        &[],
        tree_sitter_json::LANGUAGE,
    )),
    lang(
        "Bash",
        "tree-sitter-bash",
        &["sh", "bash"],
        &["sh", "bash"],
        tree_sitter_bash::LANGUAGE,
    ),
    lang(
        "CSS",
        "tree-sitter-css",
        &["css"],
        &[],
        tree_sitter_css::LANGUAGE,
    ),
    whole(lang(
        "HTML",
        "tree-sitter-html",
        &["html", "htm"],
        &[],
        tree_sitter_html::LANGUAGE,
    )),
    whole(lang(
        "TOML",
        "tree-sitter-toml-ng",
        &["toml"],
        &[],
        tree_sitter_toml_ng::LANGUAGE,
    )),
    whole(lang(
        "YAML",
        "tree-sitter-yaml",
        &["yaml", "yml"],
        &[],
        tree_sitter_yaml::LANGUAGE,
    )),
    lang(
        "Lua",
        "tree-sitter-lua",
        &["lua"],
        &["lua"],
        tree_sitter_lua::LANGUAGE,
    ),
];

/// The language of a file named `path` whose content starts with `head`.
pub fn detect(path: &str, head: &[u8]) -> Option<&'static Lang> {
    let base = path.rsplit('/').next().unwrap_or(path);
    match base.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => by_extension(ext),
        _ => by_shebang(head),
    }
}

fn by_extension(ext: &str) -> Option<&'static Lang> {
    let ext = ext.to_ascii_lowercase();
    LANGS.iter().find(|l| l.extensions.contains(&ext.as_str()))
}

/// `#!/usr/bin/env python3`, `#!/bin/sh -e`: the interpreter's name, less a
/// version suffix, picks the language.
fn by_shebang(head: &[u8]) -> Option<&'static Lang> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..memchr::memchr(b'\n', line).unwrap_or(line.len())];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let mut program = words.next()?.rsplit('/').next()?;
    if program == "env" {
        program = words.find(|w| !w.starts_with('-'))?;
    }
    let name = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    LANGS.iter().find(|l| l.interpreters.contains(&name))
}
