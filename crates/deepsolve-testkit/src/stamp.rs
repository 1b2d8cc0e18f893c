//! Emission stamps: the wall-clock time a mock wrote a streamed delta, carried inside the
//! delta's text as `⟦t=<unix µs>⟧`, so a client of the server in between can measure model
//! delta → client latency across processes on one clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// What opens a stamp; the Unix time in microseconds and [`STAMP_CLOSE`] follow.
pub const STAMP_OPEN: &str = "⟦t=";
/// What closes a stamp.
pub const STAMP_CLOSE: char = '⟧';

/// Microseconds since the Unix epoch (0 if the clock is before it).
pub fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// The stamp for `micros`.
pub fn stamp(micros: u64) -> String {
    format!("{STAMP_OPEN}{micros}{STAMP_CLOSE}")
}

/// Every well-formed stamp in `text`, in order (JSON-escaped text works too: the stamp
/// characters are never escaped).
pub fn stamps(text: &str) -> impl Iterator<Item = u64> + '_ {
    text.split(STAMP_OPEN).skip(1).filter_map(|rest| {
        let (digits, _) = rest.split_once(STAMP_CLOSE)?;
        digits.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip_and_skip_broken_ones() {
        let text = format!("a{}b⟦t=12x⟧{}⟦t=7", stamp(1_700_000_000_000_001), stamp(5));
        assert_eq!(
            stamps(&text).collect::<Vec<_>>(),
            vec![1_700_000_000_000_001, 5]
        );
        assert_eq!(stamps("no stamps").count(), 0);
    }

    #[test]
    fn the_clock_is_after_2020() {
        assert!(unix_micros() > 1_577_836_800_000_000);
    }
}
