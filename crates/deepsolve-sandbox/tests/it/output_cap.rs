//! 100 MB of output is capped while it streams: the host keeps the budget, not the flood.
//! Its own binary, so the peak-memory reading is not disturbed by other tests.

use std::time::Duration;

use crate::common::*;
use deepsolve_sandbox::*;

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

const HUNDRED_MB: u64 = 100 * 1024 * 1024;

#[tokio::test]
async fn a_hundred_megabytes_of_output_is_capped_without_exhausting_memory() {
    let sb = sandbox().await;
    let (_d, ws) = workspace();
    let budget = sb.limits().output_bytes;
    let before = peak_rss_kib();

    let mut py = python(&sb, &ws).await;
    let out = cell_with(
        &mut py,
        "import sys\nchunk = 'x' * (1 << 20)\nfor i in range(100):\n    sys.stdout.write(chunk)\nprint('END')\n'done'",
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(out.status, CellStatus::Ok, "{:?}", out.status);
    assert_eq!(out.stdout.total_bytes, HUNDRED_MB + 4);
    assert!(out.stdout.truncated);
    assert!(
        out.stdout.text.len() < budget + 200,
        "{}",
        out.stdout.text.len()
    );
    assert!(out.stdout.text.starts_with("xxxx") && out.stdout.text.ends_with("xEND\n"));
    assert!(out.stdout.text.contains("bytes of output omitted"));
    assert_eq!(
        out.value.as_deref(),
        Some("'done'"),
        "the interpreter is fine afterwards"
    );

    let shell = sh(
        &sb,
        &ws,
        "yes 0123456789 | head -c 104857600; echo; echo tail",
        Duration::from_secs(60),
    )
    .await;
    assert!(shell.success(), "{shell:?}");
    assert_eq!(shell.stdout.total_bytes, HUNDRED_MB + 6);
    assert!(shell.stdout.text.len() < budget + 200);
    assert!(shell.stdout.text.ends_with("\ntail\n"));

    let grown_mib = peak_rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 48,
        "the host's peak memory grew by {grown_mib} MiB"
    );
}
