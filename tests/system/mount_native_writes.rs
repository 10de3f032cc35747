//! A transaction leaves a file as a native write by its caller would: the
//! daemon runs as root with `allow_other`, the agent as `nobody`, and each test
//! is an attack that kept or gave more than a native write does.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Command;

use common::Mount;
use common::{as_nobody, chmod, text};

/// `security.capability` (revision 2, effective) granting CAP_SETUID, as
/// `setcap cap_setuid+ep` writes it: magic, then permitted and inheritable
/// sets, low word first.
const CAP_SETUID_EP: [u8; 20] = [
    0x01, 0x00, 0x00, 0x02, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

fn root_daemon(fill: impl FnOnce(&Path)) -> Option<Mount> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("these tests need root, to be root and nobody in turn; skipping");
        return None;
    }
    let m = Mount::start(&["-o", "allow_other"], |src: &Path| {
        chmod(src, 0o755);
        fill(src);
    })?;
    chmod(m.mnt.parent().unwrap(), 0o755);
    Some(m)
}

/// The file capability of `path`, if it has one.
fn capability(path: &Path) -> Option<Vec<u8>> {
    let mut buf = [0u8; 64];
    let n = rustix::fs::getxattr(path, "security.capability", &mut buf[..]).ok()?;
    Some(buf[..n].to_vec())
}

/// A tool everyone may write that carries a capability: a write by anyone,
/// root too, takes the capability away (the kernel's killpriv), so an edit
/// must too, whether it renames a new file over the tool or writes a
/// hard-linked one in place; else nobody's new content runs with CAP_SETUID.
#[test]
fn an_edit_never_keeps_a_file_capability() {
    let tools = ["tool", "linked", "roots"];
    let Some(m) = root_daemon(|src| {
        for name in tools {
            let path = src.join(name);
            fs::write(&path, "#!/bin/sh\necho tool\n").unwrap();
            chmod(&path, 0o777);
            if let Err(e) = rustix::fs::setxattr(
                &path,
                "security.capability",
                &CAP_SETUID_EP,
                rustix::fs::XattrFlags::empty(),
            ) {
                panic!("cannot give {name} a file capability: {e}");
            }
        }
        fs::hard_link(src.join("linked"), src.join("linked2")).unwrap();
    }) else {
        return;
    };
    for name in tools {
        assert!(capability(&m.src.join(name)).is_some(), "{name} has none");
    }
    let edit = |name: &str| {
        format!(
            "printf '%s\\n' '<<<<<<< SEARCH' 'echo tool' '=======' 'id' '>>>>>>> REPLACE' | cat > {name}.edit; echo rc=$?"
        )
    };
    for name in ["tool", "linked"] {
        let out = as_nobody(&m, &edit(name));
        assert!(text(&out).contains("rc=0"), "{name}: {}", text(&out));
    }
    m.ok(&edit("roots"));
    for name in tools {
        let path = m.src.join(name);
        assert!(
            fs::read_to_string(&path).unwrap().contains("\nid\n"),
            "{name} was not edited: the test proves nothing"
        );
        assert_eq!(capability(&path), None, "{name} kept its capability");
    }
}

/// The permission bits of `rel` in SOURCE.
fn mode_of(m: &Mount, rel: &str) -> u32 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(m.src.join(rel)).map_or(0, |meta| meta.mode() & 0o7777)
}

/// Files and directories a transaction makes get what the caller's umask
/// leaves, as its `>` and `mkdir -p` would: with umask 077 an agent's new key
/// file is its own alone, not 0644 for every user to read; with umask 002 the
/// daemon's own umask takes nothing away.
#[test]
fn new_files_and_directories_get_the_callers_umask() {
    let Some(m) = root_daemon(|src| {
        for dir in ["nb", "acl"] {
            fs::create_dir(src.join(dir)).unwrap();
            common::chown_nobody(&src.join(dir));
        }
        let acl = Command::new("setfacl")
            .args(["-d", "-m", "u::rwx,g::---,o::---"])
            .arg(src.join("acl"))
            .status()
            .expect("setfacl (package acl) is needed");
        assert!(acl.success(), "cannot set a default ACL");
    }) else {
        return;
    };
    let add = |name: &str| {
        format!(
            "printf '%s\\n' '<<<<<<< SEARCH' '=======' 'KEY=1' '>>>>>>> REPLACE' | cat > {name}.edit && \
             printf '%s\\n' '*** Begin Patch' '*** Add File: {name}.d/sub/k.env' '+KEY=2' '*** End Patch' \
             | cat > .editfs/edit && cat .editfs/status"
        )
    };
    let out = as_nobody(&m, &format!("umask 077; {}", add("nb/key.env")));
    assert!(text(&out).contains("OK"), "{}", text(&out));
    let out = as_nobody(&m, &format!("umask 002; {}", add("nb/shared.txt")));
    assert!(text(&out).contains("OK"), "{}", text(&out));
    m.ok(&format!("umask 077; {}", add("root.env")));
    let modes = |name: &str| {
        [
            mode_of(&m, name),
            mode_of(&m, &format!("{name}.d")),
            mode_of(&m, &format!("{name}.d/sub")),
            mode_of(&m, &format!("{name}.d/sub/k.env")),
        ]
    };
    assert_eq!(modes("nb/key.env"), [0o600, 0o700, 0o700, 0o600]);
    assert_eq!(modes("nb/shared.txt"), [0o664, 0o775, 0o775, 0o664]);
    assert_eq!(modes("root.env"), [0o600, 0o700, 0o700, 0o600]);
    // A default ACL stands for the umask, as for `>` and `mkdir -p`.
    let out = as_nobody(&m, &format!("umask 022; {}", add("acl/key.env")));
    assert!(text(&out).contains("OK"), "{}", text(&out));
    assert_eq!(modes("acl/key.env"), [0o600, 0o700, 0o700, 0o600]);
    let out = as_nobody(&m, "cat root.env root.env.d/sub/k.env");
    assert!(!text(&out).contains("KEY="), "{}", text(&out));
}
