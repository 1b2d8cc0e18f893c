use deepsolve_eval::stats::{mcnemar_exact, wilson};

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-4
}

#[test]
fn wilson_intervals_match_the_textbook_values() {
    assert_eq!(wilson(0, 0), (0.0, 0.0));
    let (lo, hi) = wilson(5, 10);
    assert!(near(lo, 0.2366) && near(hi, 0.7634), "{lo} {hi}");
    let (lo, hi) = wilson(0, 10);
    assert!(near(lo, 0.0) && near(hi, 0.2775), "{lo} {hi}");
    let (lo, hi) = wilson(10, 10);
    assert!(near(lo, 0.7225) && near(hi, 1.0), "{lo} {hi}");
    let (lo, hi) = wilson(81, 100);
    assert!(near(lo, 0.7222) && near(hi, 0.8749), "{lo} {hi}");
}

#[test]
fn mcnemar_is_the_exact_two_sided_binomial_on_discordant_pairs() {
    assert_eq!(mcnemar_exact(0, 0), 1.0);
    assert!(near(mcnemar_exact(0, 5), 0.0625));
    assert!(near(mcnemar_exact(1, 9), 22.0 / 1024.0));
    assert_eq!(mcnemar_exact(9, 1), mcnemar_exact(1, 9));
    assert_eq!(mcnemar_exact(4, 4), 1.0);
    // Large counts stay finite and tiny.
    let p = mcnemar_exact(100, 400);
    assert!(p > 0.0 && p < 1e-30, "{p}");
}
