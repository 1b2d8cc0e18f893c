//! The report's plots as SVG written by hand: a fixed set of elements, every text escaped,
//! deterministic output (so a report can be diffed).

use std::fmt::Write as _;

use super::Report;

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 80.0;
const FONT: &str = "DejaVu Sans, Noto Sans CJK SC, Noto Serif CJK SC, sans-serif";
const COLOURS: [&str; 6] = [
    "#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2",
];

/// Text for an SVG element or attribute.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn colour(i: usize) -> &'static str {
    COLOURS[i % COLOURS.len()]
}

fn open(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="{FONT}" font-size="13">"#
    );
    let _ = write!(
        out,
        r##"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##
    );
    let _ = write!(
        out,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="{:.1}" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        title_font_size(title),
        escape(title)
    );
}

/// The title's font size: 16, smaller for a title that would not fit the width (a long set
/// and model name cut the tokens plot's title at both ends).
fn title_font_size(title: &str) -> f64 {
    const LARGEST: f64 = 16.0;
    // Bold DejaVu Sans averages about 0.62 em per Latin character; a CJK one takes 1 em.
    let ems: f64 = title
        .chars()
        .map(|c| if c.is_ascii() { 0.62 } else { 1.0 })
        .sum();
    let fits = (WIDTH - 24.0) / ems.max(1.0);
    fits.clamp(9.0, LARGEST)
}

/// The y axis of an accuracy (0–100 %), with grid lines every 20 %.
fn accuracy_axis(out: &mut String, plot_h: f64) {
    for step in 0..=5 {
        let frac = f64::from(step) / 5.0;
        let y = TOP + plot_h * (1.0 - frac);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#dddddd"/>"##,
            WIDTH - RIGHT
        );
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}%</text>"#,
            LEFT - 8.0,
            y + 4.0,
            step * 20
        );
    }
    let _ = write!(
        out,
        r#"<text x="18" y="{:.1}" text-anchor="middle" transform="rotate(-90 18 {:.1})">accuracy</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
}

/// Accuracy per mode: a bar with its 95 % Wilson interval as a whisker.
pub(super) fn accuracy_svg(report: &Report) -> String {
    let mut out = String::new();
    open(&mut out, &format!("Accuracy per mode — {}", report.title));
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    accuracy_axis(&mut out, plot_h);
    let n = report.modes.len().max(1) as f64;
    let slot = plot_w / n;
    let bar = (slot * 0.5).min(90.0);
    let y_of = |v: f64| TOP + plot_h * (1.0 - v.clamp(0.0, 1.0));
    for (i, m) in report.modes.iter().enumerate() {
        let cx = LEFT + slot * (i as f64 + 0.5);
        let y = y_of(m.accuracy);
        let _ = write!(
            out,
            r#"<rect x="{:.1}" y="{y:.1}" width="{bar:.1}" height="{:.1}" fill="{}"/>"#,
            cx - bar / 2.0,
            TOP + plot_h - y,
            colour(i)
        );
        whisker(&mut out, cx, y_of(m.ci_low), y_of(m.ci_high));
        let _ = write!(
            out,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{:.1}% ({}/{})</text>"#,
            y_of(m.ci_high) - 8.0,
            m.accuracy * 100.0,
            m.correct,
            m.problems
        );
        let _ = write!(
            out,
            r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            TOP + plot_h + 22.0,
            escape(&m.mode)
        );
    }
    let _ = write!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555555">bars: accuracy; whiskers: 95 % Wilson interval</text>"##,
        WIDTH / 2.0,
        HEIGHT - 18.0
    );
    out.push_str("</svg>\n");
    out
}

fn whisker(out: &mut String, x: f64, y_low: f64, y_high: f64) {
    let _ = write!(
        out,
        r##"<line x1="{x:.1}" y1="{y_low:.1}" x2="{x:.1}" y2="{y_high:.1}" stroke="#222222" stroke-width="1.5"/>"##
    );
    for y in [y_low, y_high] {
        let _ = write!(
            out,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#222222" stroke-width="1.5"/>"##,
            x - 6.0,
            x + 6.0
        );
    }
}

/// Mean tokens per problem (x) against accuracy (y), one point per mode with its interval.
pub(super) fn tokens_svg(report: &Report) -> String {
    let mut out = String::new();
    open(
        &mut out,
        &format!("Tokens per problem against accuracy — {}", report.title),
    );
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    accuracy_axis(&mut out, plot_h);
    let max_tokens = report
        .modes
        .iter()
        .map(|m| m.mean_total_tokens())
        .fold(0.0, f64::max);
    let x_max = nice_ceiling(max_tokens * 1.1);
    for step in 0..=4 {
        let v = x_max * f64::from(step) / 4.0;
        let x = LEFT + plot_w * f64::from(step) / 4.0;
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#eeeeee"/>"##,
            TOP + plot_h
        );
        let _ = write!(
            out,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            TOP + plot_h + 18.0,
            thousands(v)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">mean tokens per problem (prompt + completion)</text>"#,
        LEFT + plot_w / 2.0,
        TOP + plot_h + 40.0
    );
    let y_of = |v: f64| TOP + plot_h * (1.0 - v.clamp(0.0, 1.0));
    for (i, m) in report.modes.iter().enumerate() {
        let x = LEFT + plot_w * (m.mean_total_tokens() / x_max).clamp(0.0, 1.0);
        whisker(&mut out, x, y_of(m.ci_low), y_of(m.ci_high));
        let y = y_of(m.accuracy);
        let _ = write!(
            out,
            r##"<circle cx="{x:.1}" cy="{y:.1}" r="6" fill="{}" stroke="#222222"/>"##,
            colour(i)
        );
        // A label near the right edge goes to the left of its point.
        let (label_x, anchor) = if x > LEFT + plot_w * 0.7 {
            (x - 10.0, "end")
        } else {
            (x + 10.0, "start")
        };
        let _ = write!(
            out,
            r#"<text x="{label_x:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            y - 8.0,
            escape(&m.mode)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// 1, 2 or 5 times a power of ten, at least `v` (and at least 10).
fn nice_ceiling(v: f64) -> f64 {
    if !v.is_finite() || v <= 10.0 {
        return 10.0;
    }
    let power = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * power >= v {
            return m * power;
        }
    }
    10.0 * power
}

fn thousands(v: f64) -> String {
    let n = v.round() as i64;
    let digits = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_title_is_set_smaller_to_fit_and_a_short_one_keeps_its_size() {
        assert_eq!(title_font_size("Accuracy per mode — gsm8k"), 16.0);
        let long =
            "Tokens per problem against accuracy — gsm8k-test (qwen2.5-coder-0.5b-instruct-q4_k_m)";
        let size = title_font_size(long);
        assert!(size < 16.0, "{size}");
        let ems = long.chars().count() as f64 * 0.62;
        assert!(ems * size <= WIDTH - 24.0 + 1e-9);
        // Never unreadably small, whatever the title.
        assert_eq!(title_font_size(&"x".repeat(10_000)), 9.0);
    }
}
