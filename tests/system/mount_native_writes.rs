//! A transaction leaves a file as a native write by its caller would: the
//! daemon runs as root with `allow_other`, the agent as `nobody`, and each test
//! is an attack that kept or gave more than a native write does.

use crate::common;

use std::fs;
use std::path::Path;

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
