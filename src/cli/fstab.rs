//! The command line that mount(8) and fstab use, rewritten into `editfs mount`.
//!
//! `mount -t fuse.editfs SOURCE MOUNT -o OPTS` runs mount.fuse3, which runs
//! `editfs SOURCE MOUNT -o OPTS`: no subcommand, every setting in `-o`. sshfs and
//! rclone take that form, so editfs does too: in it the mount goes to the
//! background once ready (`-f` keeps it in the foreground), `-o` may carry any
//! `editfs mount` option as `name=value` (`state_dir=/x,edits_only,keep=50`), and
//! the options that only mean something to mount(8) (`noauto`, `_netdev`, `x-*`)
//! are dropped instead of reaching the kernel, which would refuse them.

use std::ffi::OsString;
use std::path::Path;

/// Options that mount(8), fstab or systemd read and that must not reach FUSE.
const FOR_MOUNT_ONLY: &[&str] = &[
    "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group", "nofail", "_netdev",
    "netdev",
];

/// `-o` names of `editfs mount` options that a mount table must not set: they
/// belong to how the process is started, which the form itself decides.
const NOT_FROM_DASH_O: &[&str] = &["daemon", "ready-on-stdout", "help"];

/// The argument list clap should parse: the bare form becomes `mount … --daemon`,
/// and `-o` items naming `editfs mount` options become those options.
/// `subcommands` are the names clap knows; `mount_flags` the long names of
/// `editfs mount`'s options.
pub fn rewrite(
    args: Vec<OsString>,
    subcommands: &[String],
    mount_flags: &[String],
) -> Vec<OsString> {
    let Some(first) = args.get(1).map(|a| a.to_string_lossy().into_owned()) else {
        return args;
    };
    let is_subcommand = subcommands.contains(&first);
    if first == "mount" {
        let mut out = args[..2].to_vec();
        out.extend(expand_dash_o(&args[2..], mount_flags).0);
        return out;
    }
    if is_subcommand || first.starts_with('-') || !names_a_directory(&first) {
        return args;
    }
    let (rest, foreground) = expand_dash_o(&args[1..], mount_flags);
    let mut out = vec![args[0].clone(), "mount".into()];
    out.extend(rest);
    if !foreground {
        out.push("--daemon".into());
    }
    out
}

/// A word that can only be a SOURCE, not a mistyped subcommand: a path with a
/// slash, or an existing directory. Anything else is left to clap, whose error
/// for a misspelt subcommand suggests the right one.
fn names_a_directory(word: &str) -> bool {
    word.contains('/') || Path::new(word).is_dir()
}

/// Expands every `-o A,B` / `-oA,B` in `args`; also reports whether `-f` was
/// among them (which is consumed: only the bare form has it).
fn expand_dash_o(args: &[OsString], mount_flags: &[String]) -> (Vec<OsString>, bool) {
    let mut out = Vec::new();
    let mut foreground = false;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let text = word.to_string_lossy();
        let list = if text == "-o" {
            match words.next() {
                Some(v) => v.to_string_lossy().into_owned(),
                None => {
                    out.push(word.clone());
                    continue;
                }
            }
        } else if let Some(v) = text.strip_prefix("-o") {
            v.to_owned()
        } else {
            if text == "-f" {
                foreground = true;
            } else {
                out.push(word.clone());
            }
            continue;
        };
        out.extend(list.split(',').filter_map(|o| option(o, mount_flags)));
    }
    (out, foreground)
}

/// One `-o` item as a command-line word: `--name[=value]` for an editfs option,
/// `-oITEM` for a FUSE option, nothing for an option meant for mount(8).
fn option(item: &str, mount_flags: &[String]) -> Option<OsString> {
    if item.is_empty()
        || FOR_MOUNT_ONLY.contains(&item)
        || item.starts_with("x-")
        || item.starts_with("comment=")
    {
        return None;
    }
    let (name, value) = match item.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (item, None),
    };
    let long = name.replace('_', "-");
    if mount_flags.contains(&long) && !NOT_FROM_DASH_O.contains(&long.as_str()) {
        return Some(match value {
            Some(v) => format!("--{long}={v}").into(),
            None => format!("--{long}").into(),
        });
    }
    Some(format!("-o{item}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<OsString> {
        s.split(' ').map(OsString::from).collect()
    }

    fn run(s: &str) -> String {
        let subs = ["mount", "apply", "unmount"].map(String::from);
        let flags = ["state-dir", "edits-only", "keep", "daemon"].map(String::from);
        rewrite(words(s), &subs, &flags)
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn bare_form_from_mount_fuse_becomes_a_daemonized_mount() {
        assert_eq!(
            run(
                "editfs /s /m -o rw,nodev,noauto,_netdev,x-systemd.automount,state_dir=/x,edits_only,keep=50"
            ),
            "editfs mount /s /m -orw -onodev --state-dir=/x --edits-only --keep=50 --daemon"
        );
    }

    #[test]
    fn dash_f_keeps_the_bare_form_in_the_foreground() {
        assert_eq!(
            run("editfs /s /m -f -oallow_other"),
            "editfs mount /s /m -oallow_other"
        );
    }

    #[test]
    fn misspelt_subcommands_and_flags_are_left_to_clap() {
        assert_eq!(run("editfs mout a b"), "editfs mout a b");
        assert_eq!(run("editfs --version"), "editfs --version");
        assert_eq!(run("editfs apply -o x"), "editfs apply -o x");
    }

    #[test]
    fn mount_subcommand_takes_editfs_options_in_dash_o_but_not_daemon() {
        assert_eq!(
            run("editfs mount /s /m -o keep=3,ro,daemon"),
            "editfs mount /s /m --keep=3 -oro -odaemon"
        );
    }
}
