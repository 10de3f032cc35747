//! Colored diffs on a terminal. `--color auto` (the default) colors only when
//! standard output is a terminal and neither `NO_COLOR` nor `CLICOLOR=0` is set
//! (`CLICOLOR_FORCE` forces it), as ripgrep and jj do; anstream decides and strips
//! the escapes otherwise. Only the command line colors: reports in status files
//! and JSON never carry an escape.

use std::io::{self, Write};

use anstyle::{AnsiColor, Style};

/// `--color`, for the commands that print diffs.
#[derive(clap::Args, Clone, Copy)]
pub struct ColorArg {
    /// Color the diffs printed: `auto` on a terminal unless NO_COLOR is set
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = When::Auto)]
    color: When,
}

/// When to color.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum When {
    /// On a terminal, unless NO_COLOR is set (CLICOLOR_FORCE=1 forces it)
    Auto,
    /// Also through a pipe or into a file
    Always,
    /// Not even on a terminal
    Never,
}

impl ColorArg {
    /// Prints a report or a diff on standard output, its diffs colored when wanted.
    pub fn print(self, text: &str) -> io::Result<()> {
        let choice = match self.color {
            When::Auto => anstream::ColorChoice::Auto,
            When::Always => anstream::ColorChoice::Always,
            When::Never => anstream::ColorChoice::Never,
        };
        let mut out = anstream::AutoStream::new(io::stdout().lock(), choice);
        out.write_all(styled(text).as_bytes())?;
        out.flush()
    }
}

const HEADER: Style = Style::new().bold();
const HUNK: Style = AnsiColor::Cyan.on_default();
const ADDED: Style = AnsiColor::Green.on_default();
const REMOVED: Style = AnsiColor::Red.on_default();

/// `text` with the lines of each unified diff in it styled. A diff starts at a
/// `--- ` line followed by a `+++ ` line and runs while its lines look like a
/// diff's, so report lines around it are left alone.
fn styled(text: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len());
    let mut in_diff = false;
    for (i, line) in lines.iter().enumerate() {
        let starts =
            line.starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "));
        in_diff = starts || (in_diff && line.starts_with(['+', '-', ' ', '@', '\\']));
        let style = match line.as_bytes().first() {
            _ if !in_diff => None,
            Some(b'-') if starts => Some(HEADER),
            Some(b'+') if line.starts_with("+++ ") && i > 0 && lines[i - 1].starts_with("--- ") => {
                Some(HEADER)
            }
            Some(b'@') => Some(HUNK),
            Some(b'+') => Some(ADDED),
            Some(b'-') => Some(REMOVED),
            _ => None,
        };
        match style {
            Some(s) => {
                let body = line.trim_end_matches('\n');
                out.push_str(&format!("{s}{body}{s:#}"));
                out.push_str(&line[body.len()..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lines_of_diffs_are_styled() {
        let report = "OK a.py (tx 1)\n- not a diff\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n a\nnote: done\n-after\n";
        let s = styled(report);
        assert!(s.starts_with("OK a.py (tx 1)\n- not a diff\n"), "{s:?}");
        assert!(s.contains(&format!("{ADDED}+a = 2{ADDED:#}\n")), "{s:?}");
        assert!(
            s.contains(&format!("{REMOVED}-a = 1{REMOVED:#}\n")),
            "{s:?}"
        );
        assert!(s.contains(&format!("{HUNK}@@ -1 +1 @@{HUNK:#}\n")), "{s:?}");
        assert!(
            s.contains(&format!("{HEADER}+++ b/a.py{HEADER:#}\n")),
            "{s:?}"
        );
        assert!(s.ends_with(" a\nnote: done\n-after\n"), "{s:?}");
    }
}
