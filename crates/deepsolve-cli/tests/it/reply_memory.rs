//! What one big model reply costs `deepsolve serve`: through the real binary, its peak
//! resident memory during the turn (after a warm-up turn) grows by at most four times the
//! SSE bytes the model streamed, for a reply just under the cap and for one far past it,
//! whose stream the server stops reading at the cap. The cap is `llm.max_reply_mb`, at its
//! smallest here so the test stays quick.

use serde_json::{Value, json};

use crate::memory_probe::{BigReply, Measured, Part, Server, measure, probe_model};

const MIB: usize = 1024 * 1024;
const CAP: usize = MIB;
const SETTINGS: &str = "llm:\n  max_reply_mb: 1\n";
/// Characters per delta: a fast provider's batch of a dozen tokens.
const DELTA: usize = 64;

fn binary() -> &'static std::path::Path {
    assert_cmd::cargo::cargo_bin!("deepsolve")
}

/// The turn's record, `GET /api/v1/turns/{id}`.
async fn turn_view(server: &Server, turn: &str) -> Value {
    reqwest::get(format!("{}/api/v1/turns/{turn}", server.base))
        .await
        .expect("get the turn")
        .json()
        .await
        .expect("json")
}

/// The bound, with what was measured in the message.
fn assert_within_four_times_the_stream(big: BigReply, m: &Measured) {
    let streamed = big.sse_bytes_read(CAP);
    let growth = m.growth_bytes();
    assert!(
        growth <= 4 * streamed,
        "{} bytes of {}: peak growth {:.1} MiB > 4 x {:.1} MiB streamed ({m:?})",
        big.bytes,
        big.part.name(),
        growth as f64 / MIB as f64,
        streamed as f64 / MIB as f64,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_just_under_the_cap_costs_at_most_four_times_its_stream() {
    for part in [Part::Content, Part::Letters, Part::Arguments] {
        let big = BigReply {
            part,
            bytes: CAP - 16 * 1024,
            delta_chars: DELTA,
        };
        let m = measure(binary(), SETTINGS, big).await;
        assert_eq!(m.error_kind, None, "{m:?}");
        assert_ne!(m.stop_reason, "model_error", "{m:?}");
        assert_within_four_times_the_stream(big, &m);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_10_mb_reply_ends_its_round_at_the_cap_named_and_costs_at_most_four_times_the_cap() {
    for part in [Part::Content, Part::Reasoning, Part::Arguments] {
        let big = BigReply {
            part,
            bytes: 10_000_000,
            delta_chars: DELTA,
        };
        let m = measure(binary(), SETTINGS, big).await;
        assert_eq!(m.error_kind.as_deref(), Some("reply_too_large"), "{m:?}");
        assert_eq!(m.stop_reason, "model_error", "{m:?}");
        assert_within_four_times_the_stream(big, &m);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_record_names_the_cap() {
    let model = probe_model();
    let server = Server::start(binary(), &model.url(), SETTINGS);
    let big = BigReply {
        part: Part::Content,
        bytes: 2 * CAP,
        delta_chars: 1024,
    };
    let run = server.turn(&big.problem()).await;
    assert_eq!(
        run.error_kind.as_deref(),
        Some("reply_too_large"),
        "{run:?}"
    );
    let view = turn_view(&server, &run.turn_id).await;
    assert_eq!(view["stop_reason"], json!("model_error"), "{view}");
    let error = view["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("1048576 bytes") && error.contains("llm.max_reply_mb"),
        "{view}"
    );
    // The failed call ends the turn: the model is not asked again.
    assert_eq!(model.call_count(), 1);
}
