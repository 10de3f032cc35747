//! How the daemon's process gives memory back to the system.
//!
//! What the daemon itself holds stays small (its tables are capped or follow
//! what the kernel holds), but the C library's allocator keeps the pages of
//! freed memory: a soak of builds, `git`, walks and edits left 55 MiB free but
//! kept beside 6 MiB in use, growing with every burst. So the daemon uses
//! fewer heaps, allocations of 1 MiB or more are mappings of their own, and a
//! thread hands the free pages back every few seconds.

use std::time::Duration;

/// Heaps the allocator may use. Each thread that allocates gets one of them,
/// and a freed block serves only its own heap again: with one per thread (up
/// to eight per core) the free memory of one cannot serve another's next
/// burst. Two still let a commit thread and a request allocate side by side;
/// each thread's cache of small blocks takes most allocations without a lock.
const HEAPS: libc::c_int = 2;

/// Allocations of this size or more get a mapping of their own, returned to
/// the system when freed. Below it, what the trim thread gives back serves
/// the next allocation: the buffers of an edit of a file of a few hundred
/// KiB (its new content, the engine's line tables) come from the heap, not
/// each from a mapping of its own that costs a page fault per 4 KiB and an
/// unmapping (at 64 KiB, that was 100 µs of the 750 µs of CPU a round trip
/// on a 100 KiB file cost the daemon).
const OWN_MAPPING: libc::c_int = 1 << 20;

/// How often the free pages of every heap are given back.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Sets the allocator's policy; runs before the daemon starts any thread.
pub fn tune() {
    // SAFETY: mallopt only sets tuning parameters of the C library's
    // allocator, and no other thread allocates yet.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, OWN_MAPPING);
        libc::mallopt(libc::M_ARENA_MAX, HEAPS);
    }
}

/// Gives the system back the whole free pages of every heap.
pub fn trim() {
    // SAFETY: malloc_trim takes each heap's own lock; it only releases pages
    // no live block uses.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Starts the thread that trims every `TRIM_EVERY`, so memory a burst freed
/// is back with the system seconds later, idle or not. A trim walks the free
/// blocks: the 36 trims of a 5-minute soak took 20 ms of CPU in all.
pub fn start_trimming() {
    let spawned = std::thread::Builder::new()
        .name("editfs-trim".into())
        .spawn(|| {
            loop {
                std::thread::sleep(TRIM_EVERY);
                trim();
            }
        });
    if let Err(e) = spawned {
        log::warn!("cannot start the memory trimmer: {e}; freed memory stays with the daemon");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resident_bytes() -> usize {
        let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
        let pages: usize = statm
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .expect("resident pages");
        pages * 4096
    }

    /// Many small blocks, one of every 64 kept: the heap cannot shrink from its
    /// top, and only a trim gives back the pages between the survivors.
    fn fragment(bytes: usize) -> Vec<Vec<u8>> {
        let blocks: Vec<Vec<u8>> = (0..bytes / 1024).map(|i| vec![i as u8; 1024]).collect();
        blocks.into_iter().step_by(64).collect()
    }

    #[test]
    fn a_trim_gives_back_the_free_pages_a_fragmented_heap_keeps() {
        const BURST: usize = 64 << 20;
        let before = resident_bytes();
        let kept = std::thread::spawn(|| fragment(BURST))
            .join()
            .expect("burst");
        let after_burst = resident_bytes();
        assert!(
            after_burst > before + BURST / 2,
            "the burst's free pages stay resident until trimmed: {before} -> {after_burst}"
        );
        trim();
        let after_trim = resident_bytes();
        assert!(
            after_trim + BURST / 2 < after_burst,
            "a trim gives most of the burst back: {after_burst} -> {after_trim}"
        );
        drop(kept);
    }
}
