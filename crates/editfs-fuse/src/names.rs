//! Which names in the mirror are control files: `F.edit`, `F.status`, `F.status.json`.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

/// What a control file does for its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Control {
    /// Takes a transaction's payload; reads back its report.
    Edit,
    /// The latest report, as text.
    Status,
    /// The latest report, as one JSON object.
    StatusJson,
}

impl Control {
    pub const ALL: [Control; 3] = [Control::Edit, Control::Status, Control::StatusJson];
}

/// The configured suffixes.
#[derive(Clone, Debug)]
pub struct Suffixes {
    pub edit: String,
    pub status: String,
}

impl Default for Suffixes {
    fn default() -> Suffixes {
        Suffixes {
            edit: ".edit".into(),
            status: ".status".into(),
        }
    }
}

impl Suffixes {
    fn suffix(&self, c: Control) -> String {
        match c {
            Control::Edit => self.edit.clone(),
            Control::Status => self.status.clone(),
            Control::StatusJson => format!("{}.json", self.status),
        }
    }

    /// The file a control name stands for, and what it does; `None` for other names.
    /// The longest suffix is tried first, so `F.status.json` is never `F.status` + `.json`.
    pub fn parse(&self, name: &OsStr) -> Option<(OsString, Control)> {
        let bytes = name.as_bytes();
        let mut order = Control::ALL.map(|c| (self.suffix(c), c));
        order.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        order.into_iter().find_map(|(suffix, c)| {
            let base = bytes.strip_suffix(suffix.as_bytes())?;
            (!base.is_empty() && base != b"." && base != b"..")
                .then(|| (OsStr::from_bytes(base).to_owned(), c))
        })
    }

    /// The control name of `base` for `c`.
    pub fn name(&self, base: &OsStr, c: Control) -> OsString {
        let mut n = base.to_owned();
        n.push(self.suffix(c));
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_control_name() {
        let s = Suffixes::default();
        let p = |n: &str| {
            s.parse(OsStr::new(n))
                .map(|(b, c)| (b.into_string().unwrap(), c))
        };
        assert_eq!(p("a.rs.edit"), Some(("a.rs".into(), Control::Edit)));
        assert_eq!(p("a.rs.status"), Some(("a.rs".into(), Control::Status)));
        assert_eq!(
            p("a.rs.status.json"),
            Some(("a.rs".into(), Control::StatusJson))
        );
        assert_eq!(p(".edit"), None);
        assert_eq!(p("a.rs"), None);
    }

    #[test]
    fn custom_suffixes() {
        let s = Suffixes {
            edit: "~e".into(),
            status: "~s".into(),
        };
        assert_eq!(
            s.parse(OsStr::new("f~s.json")).map(|(_, c)| c),
            Some(Control::StatusJson)
        );
        assert_eq!(
            s.name(OsStr::new("f"), Control::Edit),
            OsString::from("f~e")
        );
    }
}
