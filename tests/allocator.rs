//! The allocator's settings (`linegate::memory`), in a process of their own: glibc's counts
//! of mapped blocks are global, so no other test may allocate meanwhile.

/// After `limit_arenas`, a block of [`MMAP_THRESHOLD`] or more is mapped on its own even once a
/// larger one was freed (glibc would otherwise raise its threshold to that size and serve the
/// next from an arena, where sled's I/O buffers pinned resident memory), and a smaller one is not.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn blocks_from_the_threshold_up_are_mapped_on_their_own_after_larger_ones_were_freed() {
    use linegate::memory::{limit_arenas, MMAP_THRESHOLD};
    limit_arenas();
    // SAFETY: mallinfo only reads the allocator's statistics.
    #[allow(unsafe_code)]
    let mapped = || unsafe { libc::mallinfo() }.hblks;
    drop(std::hint::black_box(vec![1u8; 8 << 20]));
    let before = mapped();
    let block = std::hint::black_box(vec![1u8; MMAP_THRESHOLD as usize + 4096]);
    assert_eq!(mapped(), before + 1, "a block above the threshold is mapped");
    drop(block);
    assert_eq!(mapped(), before, "and unmapped when freed");
    let small = std::hint::black_box(vec![1u8; MMAP_THRESHOLD as usize / 2]);
    assert_eq!(mapped(), before, "a block below it comes from an arena");
    drop(small);
}
