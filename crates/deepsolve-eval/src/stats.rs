//! The statistics of a report: Wilson score intervals and the exact McNemar test.

/// z for a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The 95 % Wilson score interval of `k` successes in `n` trials, as (low, high) in 0–1;
/// (0, 0) for no trials.
pub fn wilson(k: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 0.0);
    }
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = Z95 * Z95;
    let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = Z95 * ((p * (1.0 - p) + z2 / (4.0 * n)) / n).sqrt() / (1.0 + z2 / n);
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The exact (binomial) McNemar test: two-sided p-value of `b` and `c` discordant pairs (one
/// mode right where the other was wrong, each way) under p = 1/2; 1 with no discordant pairs.
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // Sum the binomial(n, 1/2) pmf from 0 to k in log space (no underflow for large n).
    let mut log_pmf = -(n as f64) * std::f64::consts::LN_2;
    let mut tail = 0.0;
    for i in 0..=k {
        tail += log_pmf.exp();
        log_pmf += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    (2.0 * tail).min(1.0)
}
