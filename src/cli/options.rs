//! Options shared by the commands that run the engine (`apply`, `mount`).

use clap::{Args, ValueEnum};

use crate::engine::{Ambiguity, Options, SyntaxCheck};

#[derive(Args, Clone)]
pub struct EngineArgs {
    /// `exact` turns the tolerance ladder off
    #[arg(long = "match", value_enum, default_value_t = Match::Tolerant)]
    matching: Match,
    /// When SEARCH occurs several times: `error` fails the operation, listing every match
    /// (a `:start_line:` hint picks the nearest); `first` replaces the first and warns
    #[arg(long, value_enum, default_value_t = Ambiguous::Error)]
    ambiguous: Ambiguous,
    /// Largest payload accepted, in bytes (K and M suffixes allowed)
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "100K")]
    max_content_size: usize,
    /// Largest file a transaction reads, in bytes (K, M, G suffixes): a larger one is
    /// refused (too_large, EFBIG through the mount), and its direct writes keep no pre-image
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "16M")]
    max_file_size: usize,
    /// Before a file is written, parse it (tree-sitter, and Python's indentation rules) and
    /// compare with the old content: `refuse` fails a transaction that leaves a syntax error
    /// where it changed the file (kind `syntax`, nothing written), `warn` writes it and says
    /// where, `off` does not parse. A payload can turn it off for itself (`syntax_check`)
    #[arg(long, value_enum, default_value_t = Syntax::Refuse)]
    syntax_check: Syntax,
}

#[derive(Clone, Copy, ValueEnum)]
enum Syntax {
    Refuse,
    Warn,
    Off,
}

#[derive(Clone, Copy, ValueEnum)]
enum Match {
    Exact,
    Tolerant,
}

#[derive(Clone, Copy, ValueEnum)]
enum Ambiguous {
    First,
    Error,
}

impl EngineArgs {
    pub fn options(&self) -> Options {
        Options {
            tolerant: matches!(self.matching, Match::Tolerant),
            ambiguous: match self.ambiguous {
                Ambiguous::First => Ambiguity::First,
                Ambiguous::Error => Ambiguity::Error,
            },
            max_payload: self.max_content_size,
            max_file: self.max_file_size as u64,
            syntax_check: match self.syntax_check {
                Syntax::Refuse => SyntaxCheck::Refuse,
                Syntax::Warn => SyntaxCheck::Warn,
                Syntax::Off => SyntaxCheck::Off,
            },
        }
    }

    /// The same options as command-line words, to hand to a daemon process.
    pub fn to_args(&self) -> Vec<String> {
        let matching = if matches!(self.matching, Match::Exact) {
            "exact"
        } else {
            "tolerant"
        };
        let ambiguous = if matches!(self.ambiguous, Ambiguous::Error) {
            "error"
        } else {
            "first"
        };
        let syntax = match self.syntax_check {
            Syntax::Refuse => "refuse",
            Syntax::Warn => "warn",
            Syntax::Off => "off",
        };
        vec![
            format!("--syntax-check={syntax}"),
            format!("--match={matching}"),
            format!("--ambiguous={ambiguous}"),
            format!("--max-content-size={}", self.max_content_size),
            format!("--max-file-size={}", self.max_file_size),
        ]
    }
}

/// A size in bytes, with an optional K, M or G suffix.
pub fn parse_size(s: &str) -> Result<usize, BadSize> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| BadSize::NotANumber(s.to_owned()))?;
    let factor = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1024,
        "M" | "MB" | "MIB" => 1024 * 1024,
        "G" | "GB" | "GIB" => 1024 * 1024 * 1024,
        _ => return Err(BadSize::Unit(s.to_owned())),
    };
    n.checked_mul(factor)
        .ok_or_else(|| BadSize::TooLarge(s.to_owned()))
}

/// Why a value is no size in bytes.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadSize {
    #[error("`{0}` is not a size in bytes")]
    NotANumber(String),
    #[error("unknown unit in `{0}`: use K, M or G")]
    Unit(String),
    #[error("`{0}` is too large")]
    TooLarge(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_units() {
        assert_eq!(parse_size("100K"), Ok(102_400));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert_eq!(parse_size("17"), Ok(17));
        assert!(parse_size("1X").is_err());
    }
}
