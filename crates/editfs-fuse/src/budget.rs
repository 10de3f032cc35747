//! What open `F.edit` handles may buffer: a payload is held in memory until its
//! handle commits, so ten thousand handles each holding an unfinished payload
//! would hold ten thousand payloads. Each handle charges its buffer to the user who
//! opened it, against a cap per user (EDQUOT past it, as a disk quota) and one for
//! the whole mount (ENOSPC, as a full disk); a buffer's bytes come back when its
//! handle commits or is closed.

use std::collections::HashMap;
use std::sync::Arc;

use super::types::Errno;
use parking_lot::Mutex;

/// The caps, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferCaps {
    /// All open edit handles together.
    pub total: u64,
    /// The open edit handles of one user.
    pub per_user: u64,
}

impl Default for BufferCaps {
    fn default() -> BufferCaps {
        BufferCaps {
            total: 256 << 20,
            per_user: 64 << 20,
        }
    }
}

/// Bytes buffered now, overall and per user.
#[derive(Debug)]
pub struct Budget {
    caps: BufferCaps,
    used: Mutex<(u64, HashMap<u32, u64>)>,
}

impl Budget {
    pub fn new(caps: BufferCaps) -> Arc<Budget> {
        Arc::new(Budget {
            caps,
            used: Mutex::new((0, HashMap::new())),
        })
    }

    /// An account for one handle of user `uid`, holding nothing yet.
    pub fn account(self: &Arc<Budget>, uid: u32) -> Charge {
        Charge {
            budget: self.clone(),
            uid,
            bytes: 0,
        }
    }

    fn take(&self, uid: u32, bytes: u64) -> Result<(), Errno> {
        let mut used = self.used.lock();
        let (total, users) = &mut *used;
        let mine = users.get(&uid).copied().unwrap_or(0);
        if total.saturating_add(bytes) > self.caps.total {
            return Err(Errno::ENOSPC);
        }
        if mine.saturating_add(bytes) > self.caps.per_user {
            return Err(Errno::EDQUOT);
        }
        *total += bytes;
        users.insert(uid, mine + bytes);
        Ok(())
    }

    fn give_back(&self, uid: u32, bytes: u64) {
        let mut used = self.used.lock();
        let (total, users) = &mut *used;
        *total = total.saturating_sub(bytes);
        if let Some(mine) = users.get_mut(&uid) {
            *mine = mine.saturating_sub(bytes);
            if *mine == 0 {
                users.remove(&uid);
            }
        }
    }

    /// Bytes buffered now, by everyone.
    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.used.lock().0
    }
}

/// What one handle holds; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<Budget>,
    uid: u32,
    bytes: u64,
}

impl Charge {
    /// Makes the account hold `bytes` in all, or says which cap that would pass.
    pub fn hold(&mut self, bytes: u64) -> Result<(), Errno> {
        if bytes > self.bytes {
            self.budget.take(self.uid, bytes - self.bytes)?;
        } else {
            self.budget.give_back(self.uid, self.bytes - bytes);
        }
        self.bytes = bytes;
        Ok(())
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.give_back(self.uid, self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_past_its_cap_gets_edquot_everyone_past_the_total_enospc() {
        let b = Budget::new(BufferCaps {
            total: 100,
            per_user: 60,
        });
        let mut a1 = b.account(1);
        let mut a2 = b.account(1);
        assert_eq!(a1.hold(50), Ok(()));
        assert_eq!(a2.hold(20), Err(Errno::EDQUOT));
        assert_eq!(a2.hold(10), Ok(()));
        let mut other = b.account(2);
        assert_eq!(other.hold(50), Err(Errno::ENOSPC));
        assert_eq!(other.hold(40), Ok(()));
        assert_eq!(b.used(), 100);
        drop(a1);
        assert_eq!(b.used(), 50, "a closed handle gives its bytes back");
        assert_eq!(other.hold(0), Ok(()));
        drop((a2, other));
        assert_eq!(b.used(), 0);
    }
}
