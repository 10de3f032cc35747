//! The logger: env_logger, minus the lines that report normal events as warnings.

use log::{Log, Metadata, Record};

/// env_logger with one filter in front of it.
struct Quiet(env_logger::Logger);

impl Log for Quiet {
    fn enabled(&self, metadata: &Metadata) -> bool {
        self.0.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        if self.0.matches(record) && !is_normal_event(record) {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// fuser tries to unmount once more when its session ends; after an unmount from
/// outside (`editfs unmount`, umount) the mount is already gone and the kernel
/// answers EINVAL, which fuser logs as a warning. That is how every clean stop
/// from outside ends, not a problem; the stop line says how the mount ended.
fn is_normal_event(record: &Record) -> bool {
    let text = record.args().to_string();
    record.target().starts_with("fuser")
        && (text.starts_with("Failed to umount") || text.starts_with("Unmount failed"))
        && text.contains("os error 22")
}

/// Installs the logger: RUST_LOG as env_logger reads it, `warn` by default.
pub fn init() {
    let logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).build();
    let level = logger.filter();
    if log::set_boxed_logger(Box::new(Quiet(logger))).is_ok() {
        log::set_max_level(level);
    }
}
