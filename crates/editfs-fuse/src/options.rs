//! The `-o` options of a mount: which go to the kernel, which set who may use
//! the mount, and which are refused (with what to use instead) before anything
//! starts, since the kernel would refuse them with a bare EINVAL.

use std::path::Path;

use fuser::{MountOption, SessionACL};

/// One `-o` option, as the mount takes it.
enum DashO {
    Acl(SessionACL),
    Option(MountOption),
    FsName(String),
    Subtype(String),
    /// Always in force.
    Nothing,
}

/// Options passed to the kernel as they are: FUSE's own and the security modules'.
const KERNEL_OPTIONS: &[&str] = &[
    "max_read",
    "blksize",
    "context",
    "fscontext",
    "defcontext",
    "rootcontext",
];

/// Options of libfuse or sshfs that decide how the process runs. editfs decides
/// that itself, so each is refused with what to use instead; passed on, the
/// kernel would refuse the mount with a bare EINVAL.
const PROCESS_OPTIONS: &[(&str, &str)] = &[
    (
        "daemon",
        "use --daemon; `editfs SOURCE MOUNT` (the form mount(8) runs) goes to the background by itself",
    ),
    (
        "foreground",
        "`editfs mount` stays in the foreground unless --daemon; in the form mount(8) runs, give -f",
    ),
    (
        "f",
        "`editfs mount` stays in the foreground unless --daemon; in the form mount(8) runs, give -f",
    ),
    ("ready_on_stdout", "it is internal to --daemon"),
    ("ready-on-stdout", "it is internal to --daemon"),
    ("debug", "set RUST_LOG=debug for a detailed log"),
    ("d", "set RUST_LOG=debug for a detailed log"),
    ("s", "use --threads 1"),
    ("single_threaded", "use --threads 1"),
    ("max_threads", "use --threads N"),
    ("max_idle_threads", "use --threads N"),
    ("clone_fd", "each thread always has its own descriptor"),
];

/// Why the mount does not take a `-o` option.
#[derive(Debug, thiserror::Error)]
pub enum BadOption {
    #[error("`{option}` is not a mount option: it would change how the daemon runs; {instead}")]
    Process {
        option: String,
        instead: &'static str,
    },
    #[error(
        "unknown mount option `{0}`: -o takes allow_other, allow_root, auto_unmount, ro, rw, \
         [no]dev, [no]suid, [no]exec, [no]atime, sync, async, dirsync, fsname=, subtype=, \
         {kernel}=, and every `editfs mount` option as NAME[=VALUE]",
        kernel = KERNEL_OPTIONS.join("=, ")
    )]
    Unknown(String),
}

/// Reads one `-o` option, or says why the mount does not take it.
fn dash_o(o: &str) -> Result<DashO, BadOption> {
    let option = |m| Ok(DashO::Option(m));
    match o {
        "" | "default_permissions" => Ok(DashO::Nothing),
        "allow_other" => Ok(DashO::Acl(SessionACL::All)),
        "allow_root" => Ok(DashO::Acl(SessionACL::RootAndOwner)),
        "auto_unmount" => option(MountOption::AutoUnmount),
        "ro" => option(MountOption::RO),
        "rw" => option(MountOption::RW),
        "dev" => option(MountOption::Dev),
        "nodev" => option(MountOption::NoDev),
        "suid" => option(MountOption::Suid),
        "nosuid" => option(MountOption::NoSuid),
        "exec" => option(MountOption::Exec),
        "noexec" => option(MountOption::NoExec),
        "atime" => option(MountOption::Atime),
        "noatime" => option(MountOption::NoAtime),
        "dirsync" => option(MountOption::DirSync),
        "sync" => option(MountOption::Sync),
        "async" => option(MountOption::Async),
        _ => {
            let (name, value) = o.split_once('=').unwrap_or((o, ""));
            match name {
                "fsname" => Ok(DashO::FsName(value.into())),
                "subtype" => Ok(DashO::Subtype(value.into())),
                _ if KERNEL_OPTIONS.contains(&name) => option(MountOption::CUSTOM(o.into())),
                _ => Err(match PROCESS_OPTIONS.iter().find(|(n, _)| *n == name) {
                    Some((_, instead)) => BadOption::Process {
                        option: o.to_owned(),
                        instead,
                    },
                    None => BadOption::Unknown(o.to_owned()),
                }),
            }
        }
    }
}

/// Checks `-o` options (one per element) before anything starts.
pub fn check_options(options: &[String]) -> Result<(), BadOption> {
    options.iter().try_for_each(|o| dash_o(o).map(drop))
}

/// Splits `-o` values into FUSE mount options and the session's access rule.
pub(super) fn fuse_options(
    source: &Path,
    options: &[String],
) -> Result<(Vec<MountOption>, SessionACL), BadOption> {
    let mut acl = SessionACL::Owner;
    let mut out = vec![
        MountOption::FSName(format!("editfs:{}", source.display())),
        MountOption::Subtype("editfs".into()),
        MountOption::DefaultPermissions,
    ];
    for o in options {
        match dash_o(o)? {
            DashO::Acl(a) => acl = a,
            DashO::Option(m) => out.push(m),
            DashO::FsName(v) => out[0] = MountOption::FSName(v),
            DashO::Subtype(v) => out[1] = MountOption::Subtype(v),
            DashO::Nothing => {}
        }
    }
    Ok((out, acl))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dash_o_options_map_to_fuse() {
        let (opts, acl) = fuse_options(
            Path::new("/s"),
            &["allow_other".into(), "ro".into(), "fsname=x".into()],
        )
        .unwrap();
        assert_eq!(acl, SessionACL::All);
        assert!(opts.contains(&MountOption::RO));
        assert!(opts.contains(&MountOption::FSName("x".into())));
        assert!(opts.contains(&MountOption::DefaultPermissions));
    }

    #[test]
    fn process_options_and_unknown_ones_are_refused_kernel_ones_pass() {
        for (name, instead) in PROCESS_OPTIONS {
            let err = check_options(&[format!("{name}=1")])
                .unwrap_err()
                .to_string();
            assert!(err.contains(instead), "{name}: {err}");
        }
        assert!(
            check_options(&["relatime".into()])
                .unwrap_err()
                .to_string()
                .contains("unknown")
        );
        assert!(check_options(&["max_read=4096".into(), "".into(), "ro".into()]).is_ok());
    }
}
