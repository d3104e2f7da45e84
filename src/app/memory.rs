//! The allocator's footprint (glibc malloc), for a daemon that should stay small on a 1 GB board.
//!
//! glibc gives every thread that allocates under contention an arena of its own (up to 8 per
//! core), and keeps memory freed inside an arena for reuse rather than returning it. The daemon
//! frees a lot in bursts — journal lines of raw samples, a decided batch, records the store
//! truncated — on several threads (tokio workers and blocking threads, sled's I/O threads), so
//! freed pages stay resident long after. Two calls keep that down: [`limit_arenas`] once at start
//! (before the runtime's threads exist), and [`release_free_memory`] from the telemetry sampler
//! every second (`malloc_trim(0)` returns the free pages of every arena; it takes each arena's
//! lock briefly). Elsewhere than glibc both do nothing.

/// At most this many malloc arenas.
pub const ARENA_MAX: i32 = 2;

/// Caps glibc's arenas at [`ARENA_MAX`]. Call before spawning threads.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only sets a tunable of the allocator; no pointer is involved.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
    }
}

/// Returns free memory of every malloc arena to the kernel.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_and_limiting_leave_the_allocator_working() {
        limit_arenas();
        let big: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 64 * 1024]).collect();
        drop(big);
        release_free_memory();
        let again = vec![7u8; 1 << 20];
        assert_eq!(again.iter().map(|&b| u64::from(b)).sum::<u64>(), 7 << 20);
    }
}
