//! Stage 5: the outcome checked as a whole. Every operation applied; before
//! the report calls the transaction done, the new file is checked, and a
//! check that fails fails the transaction: nothing is written.
//!
//! `check` is the one place such checks run, called by `finish` once the new
//! bytes are built and before the report is made. A check that reads the new
//! bytes as their language (their syntax, against the old bytes') belongs
//! here too: `finish` has the file's name (a moved file's new one) and its old
//! bytes at the call to hand it.

use super::Options;
use super::report::{ErrorKind, ErrorReport};

/// Checks the bytes a file will hold once written, or says why they must not
/// be written. A file the transaction removes is not checked: it will hold nothing.
pub(super) fn check(after: &[u8], opts: &Options) -> Result<(), ErrorReport> {
    within_size(after, opts)
}

/// The new file is no larger than a transaction may write (`--max-file-size`).
fn within_size(after: &[u8], opts: &Options) -> Result<(), ErrorReport> {
    if after.len() as u64 <= opts.max_file {
        return Ok(());
    }
    Err(ErrorReport::plain(
        ErrorKind::TooLarge,
        format!(
            "the file would be {} bytes, over the {} a transaction may write (--max-file-size)",
            after.len(),
            opts.max_file
        ),
        "make the file grow less in one transaction (a regex replacement that copies each match, a REPLACE sent for every occurrence), or raise --max-file-size",
    ))
}
