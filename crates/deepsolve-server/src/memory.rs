//! Giving memory back after a load. A thousand concurrent turns leave the allocator's arenas
//! full of freed chunks (glibc keeps one arena per busy thread: the runtime's workers, the
//! event writer, each SQLite connection's thread), and glibc returns only what lies at the
//! top of a heap, so without help the server stayed at its peak long after the turns ended.
//! Once the running turns have fallen well below their peak, the trimmer asks the allocator
//! to release the free pages of every arena (`malloc_trim`), once per fall, off the runtime.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::state::AppState;

/// How often the trimmer looks at the number of running turns.
const CHECK_EVERY: Duration = Duration::from_secs(2);
/// Turns that must have run at once for a trim to be worth its pause: below this, what a
/// load leaves behind is too little to matter.
const WORTH_TRIMMING: usize = 32;

/// Checks after a trim before the follow-up trim: what the load's connections and readers
/// still held when the turns ended is freed over the next seconds (clients close idle
/// connections, readers drain).
const FOLLOW_UP_AFTER: u32 = 10;

/// When to trim: after the running turns fell to a quarter of their peak since the last trim,
/// and once more a little later.
#[derive(Debug, Default)]
pub(crate) struct TrimClock {
    peak: usize,
    follow_up_in: Option<u32>,
}

impl TrimClock {
    /// Take in the current number of running turns; true when the allocator should be
    /// trimmed now.
    pub(crate) fn observe(&mut self, running: usize) -> bool {
        self.peak = self.peak.max(running);
        if self.peak >= WORTH_TRIMMING && running <= self.peak / 4 {
            self.peak = running;
            self.follow_up_in = Some(FOLLOW_UP_AFTER);
            return true;
        }
        match self.follow_up_in {
            Some(0) => {
                self.follow_up_in = None;
                true
            }
            Some(ref mut n) => {
                *n -= 1;
                false
            }
            None => false,
        }
    }
}

/// Watch the server's running turns and trim after each load; ends with the server state.
pub(crate) fn spawn_trimmer(state: &Arc<AppState>) {
    let state = Arc::downgrade(state);
    tokio::spawn(watch(state));
}

async fn watch(state: Weak<AppState>) {
    let mut clock = TrimClock::default();
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(running) = state.upgrade().map(|s| s.running_turns()) else {
            return;
        };
        if clock.observe(running) {
            // Walking every arena takes milliseconds: not on a runtime worker.
            let _ = tokio::task::spawn_blocking(release_free_memory).await;
        }
    }
}

/// Return the free pages of every allocator arena to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() {
    // SAFETY: malloc_trim only walks glibc's own free lists (under each arena's lock) and
    // advises the kernel about pages that hold no live allocation; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators return memory on their own schedule.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_follows_each_fall_from_a_load() {
        let mut clock = TrimClock::default();
        let trims = |clock: &mut TrimClock, counts: &[usize]| -> Vec<usize> {
            (0..counts.len())
                .filter(|&i| clock.observe(counts[i]))
                .collect()
        };
        // A small load is not worth a trim.
        let small: Vec<usize> = (0..20).chain((0..20).rev()).collect();
        assert_eq!(trims(&mut clock, &small), Vec::<usize>::new());
        // A load of 1 000 turns: no trim while it lasts; one as it falls below a quarter,
        // one more as it ends, and a follow-up once the server has been quiet a while.
        let mut load = vec![100, 1000, 990, 600, 250, 200, 10];
        load.extend([0; 12]);
        assert_eq!(trims(&mut clock, &load), vec![4, 6, 6 + 11]);
        // Then nothing until the next load.
        assert_eq!(trims(&mut clock, &[0; 30]), Vec::<usize>::new());
    }
}
