//! `editfs mount` and `editfs unmount`.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::ArgAction;

use crate::mount::{self, BufferCaps, MountConfig, Policy, Settings, Suffixes};
use crate::store::Retention;

use super::error::{CommandError, Ended};
use super::options::EngineArgs;
use super::state::StateArgs;

const MOUNT_HELP: &str = "\
Every regular file F under MOUNT gets three virtual siblings, not shown by ls:
  F.edit         write SEARCH/REPLACE blocks (or JSON) to it: one open handle is
                 one all-or-nothing transaction, committed at close (or at the
                 first read on the same handle, which then returns the report);
                 close fails (EINVAL rejected, EIO failed, ESTALE stale or F
                 replaced since the open, EACCES the opener may not read and
                 write F, EFBIG F or the payload too large, E2BIG over its work
                 budget) when the transaction did
  F.status       the latest report on F, as text
  F.status.json  the same report as one JSON object
Control files work for a file that does not exist yet: an empty SEARCH creates it.
An empty payload (`> F.edit` closed unwritten) is rejected; `touch F.edit` does nothing.
F.edit of a symlink edits its target while that stays inside SOURCE.
MOUNT/.editfs/ holds README (how to use the mount), history, log,
snapshots/PATH/TX (pre-images) and versions/PATH/TX (results), all read-only; edit
takes a multi-file payload (each file's path alone on a line before its blocks,
or tool calls naming their files; absolute paths inside SOURCE or MOUNT are
accepted), dry-run takes the same payload and only reports what it would do
(nothing written or logged), undo takes `PATH [TXID] [--force]` or `--tx TXID
[--force]`, and status / status.json show their latest report.
Writes that bypass the control files (sed -i, an editor's save) and removals (rm)
keep a pre-image too, except under .git/ and in paths .gitignore ignores
(see --snapshot-ignored).

Everything else passes through to SOURCE. Ctrl-C, SIGTERM or SIGHUP unmounts and
exits 0. A mount point that is already mounted is refused; a dead mount left by a
killed daemon is named as such, and `editfs unmount MOUNT` clears it. One daemon
serves a project: a second mount of the same SOURCE or state directory is refused,
naming the first one's pid and mount point, unless it has its own --state-dir. A mount
is ready once it is in the mount table as this daemon's and has answered a request:
only then does --daemon (and so mount(8)) say it is mounted, and under systemd
(Type=notify) report READY=1; STOPPING=1 comes on the way out. A daemon unmounts only
its own mount, never one made at MOUNT after it was unmounted.

Every option above may also be given in -o as NAME[=VALUE] (`-o keep=50,edits_only`).
mount(8) and fstab run `editfs SOURCE MOUNT -o OPTIONS` (type fuse.editfs): that form
is this command in the background (as with --daemon; -f keeps it in the foreground),
and options meant for mount(8) only (noauto, nofail, _netdev, x-*, defaults, user)
are ignored.";

#[derive(clap::Args)]
#[command(about = "Mirror SOURCE at MOUNT, with F.edit / F.status control files", after_help = MOUNT_HELP)]
pub struct MountArgs {
    /// The project directory to mirror
    source: PathBuf,
    /// An existing empty directory to mount on
    mountpoint: PathBuf,
    #[command(flatten)]
    engine: EngineArgs,
    #[command(flatten)]
    state: StateArgs,
    /// Refuse direct writes to existing files, and removing, renaming or replacing them
    /// (EROFS): every change goes through F.edit; new files may still be created
    #[arg(long)]
    edits_only: bool,
    /// List control files in directory listings
    #[arg(long)]
    show_control_files: bool,
    /// Suffix of the files that take transactions
    #[arg(long, value_name = "SUFFIX", default_value = ".edit")]
    edit_suffix: String,
    /// Suffix of the report files (the JSON one adds .json)
    #[arg(long, value_name = "SUFFIX", default_value = ".status")]
    status_suffix: String,
    /// Mount options, comma separated: FUSE's (allow_other, allow_root, ro, noexec,
    /// fsname=NAME, ...) and this command's own as NAME[=VALUE]; others, and those that
    /// would change how the process runs (daemon, foreground, debug), are refused
    #[arg(short = 'o', value_name = "OPTIONS", action = ArgAction::Append)]
    options: Vec<String>,
    /// Return once the mount is ready (or failed, with the reason), saying the daemon's pid
    /// and log; serve in the background
    #[arg(long)]
    daemon: bool,
    /// Threads serving requests
    #[arg(long, value_name = "N", default_value_t = 4)]
    threads: usize,
    /// Versions kept per file, before and after (the oldest go first)
    #[arg(long, value_name = "N", default_value_t = 100)]
    keep: usize,
    /// Bytes all kept versions and the branches' changes may take (K, M, G suffixes); the oldest
    /// versions go first, never one a branch's base needs
    #[arg(long, value_name = "BYTES", value_parser = super::options::parse_size, default_value = "1G")]
    keep_bytes: usize,
    /// Take no pre-image of direct writes and removals of these paths: a name (`*.o`) matches anywhere,
    /// a path (`target/**`) from SOURCE; repeatable
    #[arg(long, value_name = "GLOB", action = ArgAction::Append)]
    no_snapshot: Vec<String>,
    /// Also keep pre-images of paths the project's .gitignore files ignore (skipped by
    /// default, so a build does not fill the store; .git/ is never snapshotted)
    #[arg(long)]
    snapshot_ignored: bool,
    /// Take no pre-image of direct writes and removals of files larger than this (or than
    /// --max-file-size)
    #[arg(long, value_name = "BYTES", value_parser = super::options::parse_size, default_value = "16M")]
    snapshot_max_size: usize,
    /// Bytes all open edit handles may buffer together; past it a write fails with ENOSPC
    #[arg(long, value_name = "BYTES", value_parser = super::options::parse_size, default_value = "256M")]
    max_buffered: usize,
    /// Bytes the open edit handles of one user may buffer; past it a write fails with EDQUOT
    #[arg(long, value_name = "BYTES", value_parser = super::options::parse_size, default_value = "64M")]
    max_buffered_per_user: usize,
    /// Serve branch NAME of SOURCE (see `editfs branch`): SOURCE as it was at the branch's base
    /// and the branch's own changes; every write lands in the branch only
    #[arg(long, value_name = "NAME")]
    branch: Option<String>,
    /// Internal: report readiness on standard output (used by --daemon)
    #[arg(long, hide = true)]
    ready_on_stdout: bool,
}

#[derive(clap::Args)]
#[command(about = "Unmount an editfs mount")]
pub struct UnmountArgs {
    /// The mount point
    mountpoint: PathBuf,
}

#[derive(clap::Args)]
#[command(
    about = "Abort the FUSE connection of a daemon that died with its mount still there (started by the daemon)"
)]
pub struct RescueArgs {
    /// The daemon's process id
    pid: u32,
    /// The mount point
    mountpoint: PathBuf,
}

/// Runs the watcher a daemon starts for itself; see `crate::mount::rescue`.
pub fn rescue(args: RescueArgs) -> Result<Ended, CommandError> {
    // An inherited descriptor could be the connection itself, which would then
    // never close.
    // SAFETY: nothing in this process has opened a descriptor above 2 yet, so no
    // owner is left holding a closed one.
    unsafe {
        libc::close_range(3, libc::c_uint::MAX, 0);
    }
    mount::rescue(args.pid, args.mountpoint);
    Ok(Ended::Done)
}

impl MountArgs {
    fn config(&self) -> Result<MountConfig, CommandError> {
        // A file a transaction refuses keeps no pre-image of its direct writes either.
        let preimages = Policy::new(
            &self.no_snapshot,
            (self.snapshot_max_size as u64).min(self.engine.options().max_file),
            self.snapshot_ignored,
        )
        .map_err(|e| CommandError::usage(format!("--no-snapshot: {e}")))?;
        let options: Vec<String> = self
            .options
            .iter()
            .flat_map(|o| o.split(','))
            .map(str::to_owned)
            .collect();
        mount::check_options(&options).map_err(|e| CommandError::usage(format!("-o: {e}")))?;
        Ok(MountConfig {
            source: self.source.clone(),
            mountpoint: self.mountpoint.clone(),
            state_dir: self.state.given().map(Path::to_owned),
            settings: Settings {
                suffixes: Suffixes {
                    edit: self.edit_suffix.clone(),
                    status: self.status_suffix.clone(),
                },
                show_control_files: self.show_control_files,
                edits_only: self.edits_only,
                engine: self.engine.options(),
                preimages,
                buffers: BufferCaps {
                    total: self.max_buffered as u64,
                    per_user: self.max_buffered_per_user as u64,
                },
            },
            options,
            threads: self.threads,
            retention: Retention {
                keep: self.keep,
                cap: self.keep_bytes as u64,
            },
        })
    }

    /// The settings in force, for the start line of the log.
    fn settings_line(&self) -> String {
        let words = self.daemon_args(&self.source, &self.mountpoint);
        let settings: Vec<&str> = words[3..]
            .iter()
            .map(String::as_str)
            .filter(|w| *w != "--ready-on-stdout")
            .collect();
        format!("options: {}", settings.join(" "))
    }

    /// This command line for the background process.
    fn daemon_args(&self, source: &Path, mountpoint: &Path) -> Vec<String> {
        let mut a = vec![
            "mount".into(),
            source.display().to_string(),
            mountpoint.display().to_string(),
        ];
        a.extend(self.engine.to_args());
        if let Some(d) = self.state.given() {
            a.push(format!("--state-dir={}", absolute(d).display()));
        }
        for (on, flag) in [
            (self.edits_only, "--edits-only"),
            (self.show_control_files, "--show-control-files"),
            (self.snapshot_ignored, "--snapshot-ignored"),
        ] {
            if on {
                a.push(flag.into());
            }
        }
        a.push(format!("--edit-suffix={}", self.edit_suffix));
        a.push(format!("--status-suffix={}", self.status_suffix));
        a.extend(self.options.iter().map(|o| format!("-o{o}")));
        a.push(format!("--threads={}", self.threads));
        a.push(format!("--keep={}", self.keep));
        a.push(format!("--keep-bytes={}", self.keep_bytes));
        a.push(format!("--snapshot-max-size={}", self.snapshot_max_size));
        a.push(format!("--max-buffered={}", self.max_buffered));
        a.push(format!(
            "--max-buffered-per-user={}",
            self.max_buffered_per_user
        ));
        a.extend(
            self.no_snapshot
                .iter()
                .map(|g| format!("--no-snapshot={g}")),
        );
        if let Some(name) = &self.branch {
            a.push(format!("--branch={name}"));
        }
        a.push("--ready-on-stdout".into());
        a
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_owned())
}

pub fn run(args: MountArgs) -> Result<Ended, CommandError> {
    // A usage error is told before any process starts.
    let mut config = args.config()?;
    if args.daemon {
        return daemonize(&args);
    }
    // Dropped after the mount above it stops.
    let _stack = match &args.branch {
        Some(name) => Some(super::branch::stack(&mut config, name)?),
        None => None,
    };
    let report_ready = args.ready_on_stdout;
    if report_ready {
        // Leave the caller's session, so its hang-up does not reach the daemon.
        let _ = rustix::process::setsid();
    }
    super::memory::tune();
    super::memory::start_trimming();
    let (source, mountpoint) = (args.source.clone(), args.mountpoint.clone());
    let settings = args.settings_line();
    let started = Arc::new(AtomicBool::new(false));
    let serving = started.clone();
    let result = mount::serve(config, move |outcome| {
        if let Err(why) = outcome {
            if report_ready {
                tell_the_caller(&mount::MountError::NotReady(why).to_string());
            }
            return;
        }
        serving.store(true, Ordering::SeqCst);
        log_line(&format!(
            "editfs {} (pid {}) serving {} on {}; {settings}",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            source.display(),
            mountpoint.display(),
        ));
        if report_ready {
            tell_the_caller("ready");
        } else {
            eprintln!(
                "editfs: Ctrl-C or `editfs unmount {}` to stop",
                mountpoint.display()
            );
        }
    });
    match result {
        Ok(why) => {
            log_line(&format!(
                "editfs (pid {}) stopped: {why}",
                std::process::id()
            ));
            Ok(Ended::Done)
        }
        Err(e) => {
            if report_ready {
                println!("{e}");
            }
            let pid = std::process::id();
            if started.load(Ordering::SeqCst) {
                log_line(&format!("editfs (pid {pid}) stopped: {e}"));
            } else if report_ready {
                log_line(&format!("editfs (pid {pid}) did not start: {e}"));
            } else {
                return Err(e.into());
            }
            Ok(Ended::Failed)
        }
    }
}

/// Says `what` to the `--daemon` process waiting on standard output, then
/// points standard output at /dev/null: that process reads until it closes,
/// and nothing said later would reach anyone.
fn tell_the_caller(what: &str) {
    println!("{what}");
    let _ = std::io::stdout().flush();
    if let Ok(null) = fs::File::open("/dev/null") {
        let _ = rustix::stdio::dup2_stdout(&null);
    }
}

/// A start or stop line on standard error (daemon.log for a daemon, the journal
/// under systemd), stamped like the log's other lines.
fn log_line(what: &str) {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    eprintln!("[{now}] {what}");
}

/// Starts the mount in a new process and waits until it is ready or has failed.
fn daemonize(args: &MountArgs) -> Result<Ended, CommandError> {
    let (source, mountpoint) = mount::check_paths(&args.source, &args.mountpoint)?;
    let state = mount::state_dir(&source, args.state.given().map(absolute).as_deref())?;
    let state = match &args.branch {
        Some(name) => super::branch::state_of(&state, name),
        None => state,
    };
    let log = fs::create_dir_all(&state).and_then(|()| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(state.join("daemon.log"))
    });
    let log = log.map_err(|e| {
        let log = state.join("daemon.log");
        CommandError::failed(format!("cannot write {}: {e}", log.display()))
    })?;
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("editfs"));
    let mut cmd = Command::new(exe);
    cmd.args(args.daemon_args(&source, &mountpoint))
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    // SAFETY: close_range is async-signal-safe and touches only descriptors 3 and up,
    // after the child's standard streams are in place. It marks them close-on-exec
    // rather than closing them: the daemon keeps none of ours, and std's pipe that
    // reports a failed exec stays open until the exec, so the failure reaches us.
    unsafe {
        cmd.pre_exec(|| {
            libc::close_range(
                3,
                libc::c_uint::MAX,
                libc::CLOSE_RANGE_CLOEXEC as libc::c_int,
            );
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| CommandError::failed(format!("cannot start the daemon: {e}")))?;
    let mut said = String::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_string(&mut said);
    }
    if said.trim() == "ready" && !in_mount_table(&mountpoint) {
        let message = format!(
            "the daemon said ready, but {} is not in the mount table",
            mountpoint.display()
        );
        let log = state.join("daemon.log");
        return Err(CommandError::failed(message).hint(format!("see {}", log.display())));
    }
    if said.trim() == "ready" {
        println!(
            "editfs: {} mounted on {} by pid {}; log: {}; stop with `editfs unmount {}`",
            source.display(),
            mountpoint.display(),
            child.id(),
            state.join("daemon.log").display(),
            mountpoint.display()
        );
        return Ok(Ended::Done);
    }
    let _ = child.wait();
    let why = if said.trim().is_empty() {
        format!(
            "the daemon exited; see {}",
            state.join("daemon.log").display()
        )
    } else {
        said.trim().to_owned()
    };
    Err(CommandError::failed(why))
}

/// Whether a FUSE mount stands at `mountpoint` as this process sees the mount
/// table: "mounted" is said only of a mount its caller can see there.
fn in_mount_table(mountpoint: &std::path::Path) -> bool {
    mount::mounted_at(mountpoint).is_some_and(|what| what.starts_with("fuse"))
}

pub fn unmount(args: UnmountArgs) -> Result<Ended, CommandError> {
    mount::unmount(&args.mountpoint)
        .map_err(|e| CommandError::failed(format!("{}: {e}", args.mountpoint.display())))?;
    Ok(Ended::Done)
}
