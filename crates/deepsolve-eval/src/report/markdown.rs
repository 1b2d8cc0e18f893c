//! `report.md`.

use std::fmt::Write as _;

use super::{GroupRow, Report};

pub(super) fn render(report: &Report, has_png: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Evaluation: {}\n", cell(&report.title));
    let _ = writeln!(out, "{} problems.\n", report.problems);
    modes(&mut out, report);
    paired(&mut out, report);
    groups(&mut out, "Per level", &report.by_level);
    groups(&mut out, "Per subject", &report.by_subject);
    let ext = if has_png { "png" } else { "svg" };
    let _ = writeln!(out, "## Plots\n");
    let _ = writeln!(
        out,
        "![Accuracy per mode with 95 % intervals](accuracy.{ext})\n"
    );
    let _ = writeln!(out, "![Tokens per problem against accuracy](tokens.{ext})");
    out
}

fn modes(out: &mut String, report: &Report) {
    let _ = writeln!(out, "## Modes\n");
    let _ = writeln!(
        out,
        "| mode | correct | accuracy | 95 % interval | errors | unparsed | mean rounds | mean prompt tokens | mean completion tokens | mean time | median time | cost | stop reasons |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for m in &report.modes {
        let stops: Vec<String> = m.stops.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(
            out,
            "| {} | {}/{} | {} | {}–{} | {} | {} | {:.2} | {:.0} | {:.0} | {} | {} | {} | {} |",
            cell(&m.mode),
            m.correct,
            m.problems,
            pct(m.accuracy),
            pct(m.ci_low),
            pct(m.ci_high),
            m.errors,
            m.unparsed,
            m.mean_rounds,
            m.mean_prompt_tokens,
            m.mean_completion_tokens,
            seconds(m.mean_wall_ms),
            seconds(m.median_wall_ms as f64),
            m.cost
                .map(|c| format!("{c:.4}"))
                .unwrap_or_else(|| "—".into()),
            cell(&stops.join(", ")),
        );
    }
    let _ = writeln!(out);
    engagement(out, report);
    engine_text(out, report);
    let _ = writeln!(out, "How answers were judged:\n");
    for m in &report.modes {
        let judged: Vec<String> = m.judged.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "- {}: {}", cell(&m.mode), cell(&judged.join(", ")));
    }
    let _ = writeln!(out);
}

/// The spine's hold per mode that runs one.
fn engagement(out: &mut String, report: &Report) {
    let held: Vec<_> = (report.modes.iter())
        .filter_map(|m| m.engaged.map(|e| (&m.mode, e)))
        .collect();
    if held.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Spine engaged to the end (a plan, every step finished, an answer the model wrote):\n"
    );
    for (mode, e) in held {
        let share = if e.turns == 0 {
            0.0
        } else {
            e.engaged as f64 / e.turns as f64
        };
        let _ = writeln!(
            out,
            "- {}: {}/{} ({}), {} of them answered when asked once more",
            cell(mode),
            e.engaged,
            e.turns,
            pct(share),
            e.asked_again
        );
    }
    let _ = writeln!(out);
}

/// The answers carrying engine text, per mode.
fn engine_text(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "Answers with engine text (a `[deepsolve:` marker, a sentence of the engine's texts, a \
         solve tool's name, a call written out):\n"
    );
    for m in &report.modes {
        let ids = if m.engine_text.is_empty() {
            String::new()
        } else {
            format!(" ({})", cell(&m.engine_text.join(", ")))
        };
        let _ = writeln!(
            out,
            "- {}: {} of {}{ids}",
            cell(&m.mode),
            m.engine_text.len(),
            m.problems
        );
    }
    let _ = writeln!(out);
}

fn paired(out: &mut String, report: &Report) {
    if report.paired.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Paired comparison\n");
    let _ = writeln!(
        out,
        "| A | B | problems | both right | only A | only B | both wrong | McNemar p (exact) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for p in &report.paired {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {:.4} |",
            cell(&p.a),
            cell(&p.b),
            p.problems,
            p.both_right,
            p.only_a.len(),
            p.only_b.len(),
            p.both_wrong,
            p.p_value
        );
    }
    let _ = writeln!(out);
    for p in &report.paired {
        for (who, ids) in [(&p.a, &p.only_a), (&p.b, &p.only_b)] {
            if !ids.is_empty() {
                let _ = writeln!(out, "- only {} right: {}", cell(who), cell(&ids.join(", ")));
            }
        }
    }
    let _ = writeln!(out);
}

fn groups(out: &mut String, title: &str, rows: &[GroupRow]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(out, "## {title}\n");
    let _ = writeln!(out, "| group | mode | correct | accuracy | 95 % interval |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {}/{} | {} | {}–{} |",
            cell(&r.group),
            cell(&r.mode),
            r.correct,
            r.problems,
            pct(r.accuracy),
            pct(r.ci_low),
            pct(r.ci_high)
        );
    }
    let _ = writeln!(out);
}

fn pct(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

fn seconds(ms: f64) -> String {
    format!("{:.1} s", ms / 1000.0)
}

/// Text in a table cell: pipes escaped, line breaks flattened.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}
