//! Backoff and `Retry-After` arithmetic.

use std::time::{Duration, SystemTime};

/// No computed backoff exceeds this.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A server's `Retry-After` is honoured up to this; beyond it we would rather fail and let the
/// user decide than stall a turn.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// Relative jitter applied to computed backoff, so clients that failed together do not retry
/// together.
pub const JITTER: f64 = 0.10;

/// The delay before retry number `retry` (0 for the first retry): `base × 2^retry`, capped at
/// [`MAX_BACKOFF`], then scaled by `1 + JITTER × jitter` where `jitter` ∈ [-1, 1] (clamped), and
/// capped again.
pub fn backoff_delay(base: Duration, retry: u32, jitter: f64) -> Duration {
    let factor = 2u32.checked_pow(retry).unwrap_or(u32::MAX);
    let raw = base
        .checked_mul(factor)
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF);
    let jitter = if jitter.is_finite() {
        jitter.clamp(-1.0, 1.0)
    } else {
        0.0
    };
    raw.mul_f64(1.0 + JITTER * jitter).min(MAX_BACKOFF)
}

/// A random jitter in [-1, 1] for [`backoff_delay`].
pub fn random_jitter() -> f64 {
    rand::random_range(-1.0..=1.0)
}

/// Parses a `Retry-After` value: delay seconds (`"2"`, leniently `"1.5"`) or an HTTP-date
/// (relative to `now`; a date in the past means zero). Capped at [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let delay = match value.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => {
            Duration::try_from_secs_f64(secs).unwrap_or(MAX_RETRY_AFTER)
        }
        Ok(_) => return None,
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            at.duration_since(now).unwrap_or(Duration::ZERO)
        }
    };
    Some(delay.min(MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let base = Duration::from_millis(500);
        assert_eq!(backoff_delay(base, 0, 0.0), Duration::from_millis(500));
        assert_eq!(backoff_delay(base, 1, 0.0), Duration::from_millis(1000));
        assert_eq!(backoff_delay(base, 2, 1.0), Duration::from_millis(2200));
        assert_eq!(backoff_delay(base, 2, -1.0), Duration::from_millis(1800));
        assert_eq!(backoff_delay(base, 10, 1.0), MAX_BACKOFF);
        assert_eq!(backoff_delay(base, 40, 0.0), MAX_BACKOFF);
        assert_eq!(backoff_delay(base, 1, 7.0), Duration::from_millis(1100));
    }

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..100 {
            let j = random_jitter();
            assert!((-1.0..=1.0).contains(&j));
        }
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after(" 1 ", now), Some(Duration::from_secs(1)));
        assert_eq!(
            parse_retry_after("1.5", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after("3600", now), Some(MAX_RETRY_AFTER));
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(5));
        assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(5)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(5));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
    }
}
