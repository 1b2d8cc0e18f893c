//! A counting global allocator: allocations, bytes, live and peak heap.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub(crate) struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; we only count.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record_alloc(layout.size() as u64);
        // SAFETY: our caller upholds `GlobalAlloc::alloc`'s contract for `layout` (non-zero
        // size); it goes to the system allocator unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as u64, Relaxed);
        // SAFETY: every block we hand out comes from `System`, so `ptr` was allocated there with
        // this `layout`, as our caller guarantees it was allocated by us.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_sub(layout.size() as u64, Relaxed);
        record_alloc(new_size as u64);
        // SAFETY: `ptr` came from `System` with `layout` (every block we hand out does), and our
        // caller guarantees `new_size` is valid for it; both pass through unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn record_alloc(size: u64) {
    ALLOCATIONS.fetch_add(1, Relaxed);
    BYTES.fetch_add(size, Relaxed);
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
}

pub(crate) struct Snapshot {
    pub allocations: u64,
    pub bytes: u64,
    pub live: u64,
}

pub(crate) fn snapshot() -> Snapshot {
    Snapshot {
        allocations: ALLOCATIONS.load(Relaxed),
        bytes: BYTES.load(Relaxed),
        live: LIVE.load(Relaxed),
    }
}

pub(crate) fn reset_peak() {
    PEAK.store(LIVE.load(Relaxed), Relaxed);
}

pub(crate) fn peak() -> u64 {
    PEAK.load(Relaxed)
}
