//! `editfs mount --daemon`, `editfs unmount`, start-up errors, and a tree larger than
//! the open-file limit.

use crate::common;

use std::fs;
use std::process::Command;

use common::Mount;

fn editfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_editfs"))
}

fn mounted(mnt: &std::path::Path) -> bool {
    let table = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    table
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&*mnt.to_string_lossy()))
}

/// Pids of processes whose command line holds `needle`.
fn pids_with(needle: &str) -> Vec<String> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            let cmd = fs::read(e.path().join("cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmd)
                .replace('\0', " ")
                .contains(needle)
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn daemon_returns_when_ready_keeps_no_caller_descriptors_and_unmounts() {
    let root = tempfile::tempdir().unwrap();
    let (src, mnt) = (root.path().join("src"), root.path().join("mnt"));
    fs::create_dir(&src).unwrap();
    fs::create_dir(&mnt).unwrap();
    fs::write(src.join("f.txt"), "a\n").unwrap();
    let marker = root.path().join("caller-descriptor");
    let script = format!(
        "exec 7>'{}'; '{}' mount '{}' '{}' --daemon",
        marker.display(),
        env!("CARGO_BIN_EXE_editfs"),
        src.display(),
        mnt.display()
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    if !out.status.success() && std::env::var_os("CI").is_none() {
        eprintln!(
            "\n*** SKIPPING: FUSE cannot mount here: {} ***\n",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        mounted(&mnt),
        "--daemon returned before the mount was ready"
    );
    assert_eq!(fs::read_to_string(mnt.join("f.txt")).unwrap(), "a\n");
    let pids = pids_with(&format!("mount {}", src.display()));
    assert_eq!(pids.len(), 1, "one daemon: {pids:?}");
    let fds: Vec<String> = fs::read_dir(format!("/proc/{}/fd", pids[0]))
        .unwrap()
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        !fds.iter().any(|f| f.contains("caller-descriptor")),
        "{fds:?}"
    );
    let status = editfs().arg("unmount").arg(&mnt).status().unwrap();
    assert!(status.success());
    assert!(!mounted(&mnt));
    for _ in 0..100 {
        if pids_with(&format!("mount {}", src.display())).is_empty() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the daemon did not exit after unmount");
}

#[test]
fn start_up_errors_are_clear() {
    let root = tempfile::tempdir().unwrap();
    let out = editfs()
        .arg("mount")
        .arg(root.path().join("nope"))
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SOURCE"),
        "{out:?}"
    );
    let out = editfs()
        .arg("mount")
        .arg(root.path())
        .arg("/nonexistent/mnt")
        .arg("--daemon")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mount point"),
        "{out:?}"
    );
    let inside = root.path().join("in");
    fs::create_dir(&inside).unwrap();
    let out = editfs()
        .arg("mount")
        .arg(root.path())
        .arg(&inside)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("inside"),
        "{out:?}"
    );
    assert_eq!(
        editfs().arg("mount").output().unwrap().status.code(),
        Some(2)
    );
    let out = editfs().arg("unmount").arg(root.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_tree_larger_than_the_descriptor_limit_is_served_with_few_descriptors() {
    const FILES: usize = 50_000;
    let fill = |src: &std::path::Path| {
        for d in 0..100 {
            let dir = src.join(format!("d{d}"));
            fs::create_dir(&dir).unwrap();
            for f in 0..FILES / 100 {
                fs::write(dir.join(format!("f{f}.txt")), "x\n").unwrap();
            }
        }
    };
    let Some(m) = Mount::start(&[], fill) else {
        return;
    };
    let count = m.ok("find . -type f -not -path './.editfs/*' | wc -l");
    assert_eq!(count.trim(), FILES.to_string());
    m.ok("grep -rl x d7 | wc -l > /dev/null && cat d99/f499.txt > /dev/null");
    let pids = pids_with(&format!("mount {}", m.src.display()));
    let fds = fs::read_dir(format!("/proc/{}/fd", pids[0]))
        .unwrap()
        .count();
    // A bounded cache of open directories (256) and a few of its own, never one per file.
    assert!(fds < 300, "the daemon holds {fds} descriptors");
}

/// Runs `cmd` to its end, or kills it after 10 s (a mount that should have been
/// refused serves in the foreground instead).
fn within_10s(cmd: &mut Command) -> std::process::Output {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let began = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && began.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

#[test]
fn a_mount_point_in_use_is_refused_and_a_dead_one_is_explained() {
    let Some(m) = Mount::start(&[], |src| fs::write(src.join("f.txt"), "a\n").unwrap()) else {
        return;
    };
    let out = within_10s(editfs().arg("mount").arg(&m.src).arg(&m.mnt));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already a mount point"), "{err}");
    assert_eq!(fs::read_to_string(m.mnt.join("f.txt")).unwrap(), "a\n");

    // kill -9 leaves a dead mount behind: a remount says what it is and how to clear it.
    let pids = pids_with(&format!("mount {}", m.src.display()));
    assert_eq!(pids.len(), 1, "{pids:?}");
    Command::new("kill")
        .args(["-9", &pids[0]])
        .status()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let out = within_10s(editfs().arg("mount").arg(&m.src).arg(&m.mnt));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("dead editfs mount") && err.contains("editfs unmount"),
        "{err}"
    );
    let out = editfs().arg("unmount").arg(&m.mnt).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!mounted(&m.mnt));
}

#[test]
fn unmount_of_a_directory_that_is_not_mounted_says_so() {
    let root = tempfile::tempdir().unwrap();
    let out = editfs().arg("unmount").arg(root.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not mounted"), "{err}");
}

#[test]
fn daemon_reports_a_failure_to_start_its_child() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let (src, mnt) = (root.path().join("src"), root.path().join("mnt"));
    fs::create_dir_all(src.join(".editfs")).unwrap();
    fs::create_dir(&mnt).unwrap();
    let exe = root.path().join("editfs-copy");
    fs::copy(env!("CARGO_BIN_EXE_editfs"), &exe).unwrap();
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
    // The parent waits on opening its log (a FIFO) while its binary goes away, so
    // starting the child fails: that must be reported, not taken for a start.
    let log = src.join(".editfs/daemon.log");
    assert!(Command::new("mkfifo").arg(&log).status().unwrap().success());
    let parent = Command::new(&exe)
        .arg("mount")
        .arg(&src)
        .arg(&mnt)
        .arg("--daemon")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    fs::remove_file(&exe).unwrap();
    // Opened without waiting for a writer: a parent that failed earlier must not hang the test.
    let _reader = {
        use std::os::unix::fs::OpenOptionsExt;
        fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&log)
            .unwrap()
    };
    let out = parent.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot start the daemon"), "{err}");
    assert!(!mounted(&mnt));
}

/// `editfs mount ARGS --daemon`, run from `dir`: its exit code and what it said.
fn daemon_mount(dir: &std::path::Path, args: &[&std::path::Path]) -> (Option<i32>, String) {
    let out = within_10s(
        editfs()
            .current_dir(dir)
            .arg("mount")
            .args(args)
            .arg("--daemon"),
    );
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), said)
}

#[test]
fn a_second_mount_of_one_project_is_refused_however_spelt_and_names_the_first() {
    let Some(m) = Mount::start(&[], |src| fs::write(src.join("f.txt"), "a\n").unwrap()) else {
        return;
    };
    let root = m.src.parent().unwrap().to_owned();
    let pid = pids_with(&format!("mount {}", m.src.display()));
    assert_eq!(pid.len(), 1, "{pid:?}");
    let other = root.join("other");
    fs::create_dir(&other).unwrap();
    std::os::unix::fs::symlink(&m.src, root.join("link")).unwrap();
    let spellings = [
        m.src.clone(),
        root.join("link"),
        root.join("link/"),
        root.join("mnt/../src/"),
        "src/".into(),
        "./link".into(),
    ];
    for source in &spellings {
        let (code, said) = daemon_mount(&root, &[source, &other]);
        assert_eq!(
            code,
            Some(1),
            "{} was mounted twice: {said}",
            source.display()
        );
        assert!(
            said.contains(&format!("editfs pid {}", pid[0]))
                && said.contains(&m.mnt.display().to_string())
                && said.contains("--state-dir"),
            "{said}"
        );
        assert!(!mounted(&other));
    }

    // The same state directory under another SOURCE is the same project's store.
    let src2 = root.join("src2");
    fs::create_dir(&src2).unwrap();
    let (code, said) = daemon_mount(
        &root,
        &[
            &src2,
            &other,
            std::path::Path::new("--state-dir=src/.editfs/"),
        ],
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains(&format!("editfs pid {}", pid[0])), "{said}");

    // Its own state directory makes a second mount of SOURCE a separate project.
    let (code, said) = daemon_mount(
        &root,
        &[&m.src, &other, std::path::Path::new("--state-dir=state2")],
    );
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(fs::read_to_string(other.join("f.txt")).unwrap(), "a\n");
    assert!(
        editfs()
            .arg("unmount")
            .arg(&other)
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn a_daemon_killed_with_sigkill_does_not_block_the_next_mount_of_its_project() {
    let Some(m) = Mount::start(&[], |src| fs::write(src.join("f.txt"), "a\n").unwrap()) else {
        return;
    };
    let root = m.src.parent().unwrap().to_owned();
    let pids = pids_with(&format!("mount {}", m.src.display()));
    assert_eq!(pids.len(), 1, "{pids:?}");
    Command::new("kill")
        .args(["-9", &pids[0]])
        .status()
        .unwrap();
    for _ in 0..100 {
        if !std::path::Path::new(&format!("/proc/{}", pids[0])).exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The dead mount stays where it was; the project mounts again elsewhere.
    let again = root.join("again");
    fs::create_dir(&again).unwrap();
    let (code, said) = daemon_mount(&root, &[&m.src, &again]);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(fs::read_to_string(again.join("f.txt")).unwrap(), "a\n");
    assert!(
        editfs()
            .arg("unmount")
            .arg(&again)
            .status()
            .unwrap()
            .success()
    );
    assert!(
        editfs()
            .arg("unmount")
            .arg(&m.mnt)
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn dash_o_options_that_would_change_how_the_daemon_runs_are_refused_with_what_to_use() {
    let root = tempfile::tempdir().unwrap();
    let (src, mnt) = (root.path().join("src"), root.path().join("mnt"));
    fs::create_dir(&src).unwrap();
    fs::create_dir(&mnt).unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["mount", "-o", "daemon"], "use --daemon"),
        (
            &["mount", "--daemon", "-o", "rw,ready_on_stdout"],
            "internal to --daemon",
        ),
        (&["mount", "-o", "foreground"], "give -f"),
        (&["mount", "-o", "debug"], "RUST_LOG=debug"),
        (&["-o", "rw,max_threads=8"], "--threads"),
        (
            &["mount", "-o", "relatime"],
            "unknown mount option `relatime`",
        ),
    ];
    for (args, says) in cases {
        let mut cmd = editfs();
        match args.split_first() {
            Some((&"mount", rest)) => cmd.arg("mount").arg(&src).arg(&mnt).args(rest),
            _ => cmd.arg(&src).arg(&mnt).args(args),
        };
        let out = within_10s(&mut cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!mounted(&mnt), "{args:?} mounted");
        assert!(!src.join(".editfs").exists(), "{args:?} started something");
    }
}

/// A daemon on its way out once unmounted MOUNT by path, after `editfs unmount`
/// had already taken its mount off: a mount made there in that moment (with
/// another state directory, as `mount -T` of an fstab line does) had said
/// "mounted" and was gone a moment later, so direct writes reached SOURCE past
/// `--edits-only` and every snapshot. First held open deterministically (the old
/// daemon stopped until the new mount is up), then repeated as it happened:
/// under CPU load, the old daemon slowed by 300 removals to file.
#[test]
fn a_mount_made_while_the_previous_daemon_is_still_exiting_stays_mounted() {
    let root = tempfile::tempdir().unwrap();
    let (src, mnt) = (root.path().join("src"), root.path().join("mnt"));
    fs::create_dir(&src).unwrap();
    fs::create_dir(&mnt).unwrap();
    let script = format!(
        r#"
E='{e}'; S='{s}'; M='{m}'; B='{b}'
burn() {{ while :; do :; done; }}
burn & burn &
trap 'kill $(jobs -p) 2>/dev/null; "$E" unmount "$M" 2>/dev/null' EXIT
pid_of() {{ sed -n 's/.* by pid \([0-9]*\);.*/\1/p'; }}
gone() {{ for _ in $(seq 200); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done; return 1; }}
check() {{
  if grep -q " $M " /proc/self/mountinfo; then echo "$1: kept"; else echo "$1: lost"; fi
  "$E" unmount "$M" 2>/dev/null
}}
old=$("$E" mount "$S" "$M" --daemon | pid_of)
[ -n "$old" ] || {{ echo "cannot mount"; exit 3; }}
kill -STOP "$old"
"$E" unmount "$M"
new=$("$E" mount "$S" "$M" --daemon --state-dir "$B" | pid_of)
kill -CONT "$old"
gone "$old" || echo "stopped: old daemon still running"
check stopped
gone "$new"
for i in 1 2 3 4 5; do
  for f in $(seq 300); do echo "file $f" > "$S/f$f"; done
  old=$("$E" mount "$S" "$M" --daemon | pid_of)
  rm -f "$M"/f*
  "$E" unmount "$M"
  new=$("$E" mount "$S" "$M" --daemon --state-dir "$B" | pid_of)
  gone "$old" || echo "cycle $i: old daemon still running"
  check "cycle $i"
  gone "$new"
done
"#,
        e = env!("CARGO_BIN_EXE_editfs"),
        s = src.display(),
        m = mnt.display(),
        b = root.path().join("other-state").display(),
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status.code() == Some(3) && std::env::var_os("CI").is_none() {
        eprintln!("\n*** SKIPPING: FUSE cannot mount here ***\n");
        return;
    }
    let said = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{said}");
    assert_eq!(stdout.matches(": kept").count(), 6, "{said}");
    assert!(!stdout.contains("still running"), "{said}");
}

/// `editfs list` names running mounts and dead ones; `editfs prompt MOUNT`
/// names the mount, and its example, run as printed, makes its edit.
#[test]
fn list_shows_running_and_dead_mounts_and_the_prompts_example_works_as_printed() {
    let root = tempfile::tempdir().unwrap();
    let (src, mnt) = (root.path().join("src"), root.path().join("mnt"));
    fs::create_dir_all(src.join("src")).unwrap();
    fs::create_dir(&mnt).unwrap();
    fs::write(
        src.join("src/app.py"),
        "def greet(name):\n    print(\"Hello, \" + name)\n",
    )
    .unwrap();
    let out = editfs()
        .arg("mount")
        .arg(&src)
        .arg(&mnt)
        .arg("--daemon")
        .output()
        .unwrap();
    if !out.status.success() && std::env::var_os("CI").is_none() {
        eprintln!("\n*** SKIPPING: FUSE cannot mount here ***\n");
        return;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = |json: bool| {
        let mut cmd = editfs();
        cmd.arg("list");
        if json {
            cmd.arg("--json");
        }
        String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned()
    };
    let line = listed(false)
        .lines()
        .find(|l| l.starts_with(&*mnt.to_string_lossy()))
        .map(str::to_owned)
        .unwrap_or_default();
    assert!(
        line.contains(&*src.to_string_lossy()) && line.contains("\tserving\t"),
        "{line}"
    );
    let prompt = editfs().arg("prompt").arg(&mnt).output().unwrap();
    let text = String::from_utf8_lossy(&prompt.stdout);
    assert!(
        text.contains(&format!("mounted at {}", mnt.display())),
        "{text}"
    );
    let example: String = text
        .lines()
        .skip_while(|l| !l.starts_with("    cat >"))
        .take_while(|l| l.starts_with("    ") || l.is_empty())
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    let ran = Command::new("bash")
        .arg("-c")
        .arg(&example)
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{example}\n{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(
        String::from_utf8_lossy(&ran.stdout).starts_with("OK"),
        "{example}"
    );
    assert_eq!(
        fs::read_to_string(src.join("src/app.py")).unwrap(),
        "def greet(name):\n    print(f\"Hello, {name}!\")\n"
    );
    for pid in pids_with(&format!("mount {}", src.display())) {
        let _ = Command::new("kill").args(["-9", &pid]).status();
    }
    let dead = (0..100).find_map(|_| {
        std::thread::sleep(std::time::Duration::from_millis(50));
        listed(true)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["mountpoint"] == *mnt.to_string_lossy() && v["serving"] == false)
    });
    let _ = editfs().arg("unmount").arg(&mnt).output();
    assert!(dead.is_some(), "{}", listed(true));
}
