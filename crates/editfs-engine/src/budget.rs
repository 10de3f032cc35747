//! The work one transaction may do, so that no payload runs on for minutes.
//!
//! The engine has no clock, so work is counted, not timed, in units of about
//! one byte of the file read once: an operation whose SEARCH is found costs
//! its own text (the file's lines are indexed), one that misses reads the
//! file once more (the tolerance ladder, the search as text), a regex
//! operation reads it `REGEX_WEIGHT` times (its automaton is slower than a
//! line comparison), each match costs `text_match::HIT_WEIGHT` and its
//! replacement, and a failing operation's diagnosis (the search for its
//! closest region) reads the file `DIAGNOSIS_WEIGHT` times. A transaction may spend `FLOOR` units plus `PER_BYTE` per byte of
//! its file; past that it fails as `over_budget`, with what to do instead.
//! Besides, only the first `MAX_DIAGNOSED` failing operations are diagnosed:
//! the rest fail with a short report, counted in a note; and the replacements
//! the matches of `all` and regex operations make are at most the largest
//! file a transaction may write, in all, so they never hold more memory than
//! the result could.

use std::cell::Cell;

/// Units every transaction may spend, whatever its file: many blocks on a
/// small file. A unit is about half a nanosecond of matching on a current
/// machine, so this is about half a second of work (2,250 one-line SEARCHes
/// that match nothing take 0.8 s on a 1 MB file).
pub const FLOOR: u64 = 1 << 30;

/// Units a transaction may spend per byte of its file: as many passes over it.
pub const PER_BYTE: u64 = 256;

/// Passes over the file a regex operation is counted as.
pub const REGEX_WEIGHT: u64 = 8;

/// Passes over the file the diagnosis of one failing operation is counted as.
pub const DIAGNOSIS_WEIGHT: u64 = 8;

/// Bytes of memory one match takes besides its replacement: its span, its
/// buffer, and the allocator's rounding of a small buffer.
pub const MATCH_BYTES: u64 = 64;

/// Failing operations diagnosed in full (closest region, differences) in one
/// transaction: one diagnosis can read the file several times, and an agent
/// fixes a handful of blocks at a time anyway.
pub const MAX_DIAGNOSED: usize = 8;

/// What a transaction may still spend, and how its failures were diagnosed.
#[derive(Debug)]
pub struct Budget {
    left: Cell<u64>,
    total: u64,
    /// Bytes of replacements the transaction's matches may still make: a
    /// result is at most `--max-file-size`, and so is what builds it.
    output: Cell<u64>,
    diagnosed: Cell<usize>,
    undiagnosed: Cell<usize>,
}

/// The budget ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spent {
    /// The units the transaction had.
    pub total: u64,
}

impl Budget {
    /// The budget of a transaction on a file of `len` bytes whose result may
    /// be `max_file` bytes at most.
    pub fn for_file(len: usize, max_file: u64) -> Budget {
        let units = FLOOR.saturating_add(PER_BYTE.saturating_mul(len as u64));
        Budget {
            output: Cell::new(max_file),
            ..Budget::of(units)
        }
    }

    /// A budget of `units`, with no bound on output.
    pub fn of(units: u64) -> Budget {
        Budget {
            output: Cell::new(u64::MAX),
            left: Cell::new(units),
            total: units,
            diagnosed: Cell::new(0),
            undiagnosed: Cell::new(0),
        }
    }

    /// Spends `units`, or says the budget cannot pay them (and spends nothing).
    pub fn charge(&self, units: u64) -> Result<(), Spent> {
        match self.left.get().checked_sub(units) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => Err(Spent { total: self.total }),
        }
    }

    /// Spends what one match costs: `units`, and `bytes` of replacement
    /// against the output bound, with `MATCH_BYTES` for the match itself
    /// (its place and its replacement's buffer), so that a pattern matching
    /// at every character holds no more memory than the bound either.
    pub fn charge_match(&self, units: u64, bytes: usize) -> Result<(), Spent> {
        let held = (bytes as u64).saturating_add(MATCH_BYTES);
        let output = self
            .output
            .get()
            .checked_sub(held)
            .ok_or(Spent { total: self.total })?;
        self.charge(units.saturating_add(bytes as u64))?;
        self.output.set(output);
        Ok(())
    }

    /// Whether one more failing operation over `len` bytes is diagnosed: the
    /// first `MAX_DIAGNOSED` are, while the budget pays for them. One that is
    /// not is counted (`undiagnosed`).
    pub fn diagnoses(&self, len: usize) -> bool {
        let cost = DIAGNOSIS_WEIGHT.saturating_mul(len as u64);
        if self.diagnosed.get() < MAX_DIAGNOSED && self.charge(cost).is_ok() {
            self.diagnosed.set(self.diagnosed.get() + 1);
            return true;
        }
        self.undiagnosed.set(self.undiagnosed.get() + 1);
        false
    }

    /// Failing operations reported without a diagnosis.
    pub fn undiagnosed(&self) -> usize {
        self.undiagnosed.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_the_budget_cannot_pay_spends_nothing() {
        let b = Budget::of(10);
        assert_eq!(b.charge(6), Ok(()));
        assert_eq!(b.charge(5), Err(Spent { total: 10 }));
        assert_eq!(b.charge(4), Ok(()), "the refused charge took nothing");
        assert_eq!(b.charge(1), Err(Spent { total: 10 }));
    }

    #[test]
    fn only_the_first_failures_are_diagnosed_and_the_rest_are_counted() {
        let b = Budget::of(u64::MAX);
        let diagnosed = (0..MAX_DIAGNOSED + 5).filter(|_| b.diagnoses(100)).count();
        assert_eq!(diagnosed, MAX_DIAGNOSED);
        assert_eq!(b.undiagnosed(), 5);
    }

    #[test]
    fn a_diagnosis_the_budget_cannot_pay_is_left_out() {
        let b = Budget::of(DIAGNOSIS_WEIGHT * 100);
        assert!(b.diagnoses(100));
        assert!(!b.diagnoses(1), "nothing is left to pay for it");
        assert_eq!(b.undiagnosed(), 1);
    }

    #[test]
    fn replacements_past_the_largest_file_are_refused_however_cheap() {
        let b = Budget::for_file(0, 2 * MATCH_BYTES + 100);
        assert_eq!(b.charge_match(1, 60), Ok(()));
        assert!(b.charge_match(1, 60).is_err());
        assert_eq!(b.charge_match(1, 40), Ok(()));
        assert!(
            b.charge_match(1, 0).is_err(),
            "a match holds memory however short"
        );
    }

    #[test]
    fn a_file_buys_passes_over_it_above_the_floor() {
        let b = Budget::for_file(1 << 20, u64::MAX);
        assert_eq!(b.charge(FLOOR + PER_BYTE * (1 << 20)), Ok(()));
        assert!(b.charge(1).is_err());
    }
}
