//! `results.csv`: one row per problem and mode.

use crate::record::ResultRecord;

const HEADER: [&str; 18] = [
    "id",
    "mode",
    "expected",
    "answer",
    "correct",
    "judged",
    "extraction",
    "rounds",
    "prompt_tokens",
    "completion_tokens",
    "cost",
    "wall_ms",
    "stop",
    "error",
    "level",
    "subject",
    "language",
    "turn_id",
];

pub(super) fn render(records: &[ResultRecord]) -> String {
    let mut out = HEADER.join(",");
    out.push('\n');
    for r in records {
        let fields = [
            r.id.clone(),
            r.mode.clone(),
            r.expected.clone(),
            r.answer.clone().unwrap_or_default(),
            r.correct.to_string(),
            r.judged.as_str().to_string(),
            r.extraction
                .map(|e| e.as_str().to_string())
                .unwrap_or_default(),
            r.rounds.to_string(),
            r.prompt_tokens.to_string(),
            r.completion_tokens.to_string(),
            r.cost.map(|c| format!("{c:.6}")).unwrap_or_default(),
            r.wall_ms.to_string(),
            r.stop.clone().unwrap_or_default(),
            r.error
                .as_ref()
                .map(|e| format!("{}: {}", e.kind, e.message))
                .unwrap_or_default(),
            r.level.clone().unwrap_or_default(),
            r.subject.clone().unwrap_or_default(),
            r.language.code().to_string(),
            r.turn_id.clone().unwrap_or_default(),
        ];
        let row: Vec<String> = fields.iter().map(|f| field(f)).collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// RFC 4180: quoted when it holds a comma, quote or line break; quotes doubled.
pub(super) fn field(value: &str) -> String {
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value.to_string()
    }
}
