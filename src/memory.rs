//! The allocator's footprint (glibc malloc), for a daemon that should stay small on a 1 GB board.
//!
//! glibc gives every thread that allocates under contention an arena of its own (up to 8 per
//! core), and keeps memory freed inside an arena for reuse rather than returning it. The daemon
//! frees a lot in bursts — journal lines of raw samples, a decided batch, records the store
//! truncated — on several threads (tokio workers and blocking threads, sled's I/O threads), so
//! freed pages stay resident long after. Three settings keep that down: [`limit_arenas`] once at
//! start (before the runtime's threads exist) caps the arenas at [`ARENA_MAX`] (or at the
//! environment's `MALLOC_ARENA_MAX`) and maps every allocation of [`MMAP_THRESHOLD`] or more on
//! its own, and [`release_free_memory`] from the telemetry sampler every second
//! (`malloc_trim(0)` returns the free pages of every arena; it takes each arena's lock briefly).
//! Elsewhere than glibc they do nothing. The figures behind both numbers:
//! docs/decisions/0015-the-allocators-settings.md.

/// At most this many malloc arenas: fewer than glibc's 8 per core, enough that the decide stage,
/// the ingest and sled's I/O threads seldom wait for each other's arena lock (with 2, a burst
/// through `run` took 15 % longer).
pub const ARENA_MAX: i32 = 8;

/// Allocations of this many bytes or more are mapped on their own and unmapped when freed:
/// sled's I/O buffers above all (512 KiB and its header, one at each flush), which, kept inside
/// the arenas, pinned some 10 MiB of a burst's peak RSS. Setting it also stops glibc from raising
/// the threshold as large blocks are freed.
pub const MMAP_THRESHOLD: i32 = 512 * 1024;

/// The arena cap [`limit_arenas`] set, and a `MALLOC_ARENA_MAX` it could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arenas {
    /// The cap set.
    pub max: i32,
    /// The environment's `MALLOC_ARENA_MAX` when it was set but not a positive count (then the
    /// cap is [`ARENA_MAX`]): the caller logs it.
    pub ignored: Option<String>,
}

/// The arena cap for the environment's `MALLOC_ARENA_MAX` (`env`, unset: `None`): glibc's own
/// variable, honoured so that an operator can trade a burst's speed for memory (one or two
/// arenas: 5–8 MiB less at the peak of a burst, 20–50 % slower; docs/operations.md, the
/// daemon); otherwise [`ARENA_MAX`].
pub fn arena_cap(env: Option<&str>) -> Arenas {
    match env {
        None => Arenas { max: ARENA_MAX, ignored: None },
        Some(raw) => match raw.trim().parse::<i32>() {
            Ok(n) if n > 0 => Arenas { max: n, ignored: None },
            _ => Arenas { max: ARENA_MAX, ignored: Some(raw.to_owned()) },
        },
    }
}

/// Caps glibc's arenas ([`arena_cap`] of the environment's `MALLOC_ARENA_MAX`) and sets the mmap
/// threshold to [`MMAP_THRESHOLD`]. Call before spawning threads.
pub fn limit_arenas() -> Arenas {
    let env = std::env::var("MALLOC_ARENA_MAX").ok();
    let arenas = arena_cap(env.as_deref());
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only sets tunables of the allocator; no pointer is involved.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas.max);
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    }
    arenas
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
    fn the_environment_sets_the_cap_when_it_is_a_positive_count() {
        assert_eq!(arena_cap(None), Arenas { max: ARENA_MAX, ignored: None });
        assert_eq!(arena_cap(Some("1")), Arenas { max: 1, ignored: None });
        assert_eq!(arena_cap(Some(" 2\n")), Arenas { max: 2, ignored: None });
        for bad in ["0", "-1", "two", ""] {
            let got = arena_cap(Some(bad));
            assert_eq!(got, Arenas { max: ARENA_MAX, ignored: Some(bad.to_owned()) }, "{bad:?}");
        }
    }

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
