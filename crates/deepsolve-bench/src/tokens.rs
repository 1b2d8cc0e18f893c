//! `bench tokens`: the engine's token estimate against the exact o200k count, per kind of text.
//!
//! The samples come from the repository itself (prompts, README, source, the sandbox driver,
//! tool arguments built from them) plus generated adversarial runs of letters, since model
//! output is untrusted. Each kind is cut into pieces of a few hundred bytes to a few KiB (the
//! size of a message) and the relative error is taken per piece.

use std::time::Instant;

use serde_json::json;
use tiktoken_rs::CoreBPE;

const README: &str = include_str!("../../../README.md");
const ARCHITECTURE: &str = include_str!("../../../ARCHITECTURE.md");
const DRIVER_PY: &str = include_str!("../../deepsolve-sandbox/src/python/driver.py");
const CONTEXT_RS: &str = include_str!("../../deepsolve-core/src/context.rs");
const BUDGET_RS: &str = include_str!("../../deepsolve-core/src/engine/budget.rs");
const MATH: &str = include_str!("../corpus/math.md");

/// The prompts in both languages, as (english, chinese) pairs.
const PROMPTS: &[(&str, &str)] = &[
    (
        include_str!("../../deepsolve-core/prompts/en/playbook.md"),
        include_str!("../../deepsolve-core/prompts/zh/playbook.md"),
    ),
    (
        include_str!("../../deepsolve-core/prompts/en/plan_instruction.md"),
        include_str!("../../deepsolve-core/prompts/zh/plan_instruction.md"),
    ),
    (
        include_str!("../../deepsolve-core/prompts/en/solve_plan_description.md"),
        include_str!("../../deepsolve-core/prompts/zh/solve_plan_description.md"),
    ),
    (
        include_str!("../../deepsolve-core/prompts/en/solve_finish_step_description.md"),
        include_str!("../../deepsolve-core/prompts/zh/solve_finish_step_description.md"),
    ),
    (
        include_str!("../../deepsolve-core/prompts/en/solve_replan_description.md"),
        include_str!("../../deepsolve-core/prompts/zh/solve_replan_description.md"),
    ),
    (
        include_str!("../../deepsolve-core/prompts/en/tags_manifest.md"),
        include_str!("../../deepsolve-core/prompts/zh/tags_manifest.md"),
    ),
    (
        include_str!("../../deepsolve-core/prompts/en/ultimatum.md"),
        include_str!("../../deepsolve-core/prompts/zh/ultimatum.md"),
    ),
    (
        include_str!("../../deepsolve-core/prompts/en/replan_instruction.md"),
        include_str!("../../deepsolve-core/prompts/zh/replan_instruction.md"),
    ),
    (
        include_str!("../../deepsolve-core/prompts/en/refuse_plan_first.md"),
        include_str!("../../deepsolve-core/prompts/zh/refuse_plan_first.md"),
    ),
    (
        include_str!("../../deepsolve-core/prompts/en/nudge_plan_first.md"),
        include_str!("../../deepsolve-core/prompts/zh/nudge_plan_first.md"),
    ),
];

/// One kind of text, cut into pieces.
pub(crate) struct Kind {
    pub(crate) name: &'static str,
    pub(crate) pieces: Vec<String>,
}

/// The README's and ARCHITECTURE's prose paragraphs (no tables, code or headings) and the
/// English prompts.
fn english_prose() -> String {
    let mut out = String::new();
    for doc in [README, ARCHITECTURE] {
        for para in doc.split("\n\n") {
            let prose = !para.trim_start().starts_with(['|', '`', '#', '-', ' '])
                && para.chars().filter(|c| c.is_alphabetic()).count() > para.len() * 2 / 3;
            if prose {
                out.push_str(para);
                out.push_str("\n\n");
            }
        }
    }
    for (en, _) in PROMPTS {
        out.push_str(en);
        out.push('\n');
    }
    out
}

fn chinese() -> String {
    PROMPTS
        .iter()
        .map(|(_, zh)| *zh)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Chinese and English paragraphs interleaved, as a bilingual answer or a zh problem quoting
/// English would have them.
fn mixed() -> String {
    let mut out = String::new();
    for (en, zh) in PROMPTS {
        for (e, z) in en.split("\n\n").zip(zh.split("\n\n")) {
            out.push_str(z);
            out.push('\n');
            out.push_str(e);
            out.push_str("\n\n");
        }
    }
    out
}

/// Tool-call arguments as models send them: code in a JSON string, plans, summaries.
fn tool_arguments() -> String {
    let mut out = String::new();
    for chunk in DRIVER_PY.split("\n\n\n") {
        out.push_str(&json!({"code": chunk, "timeout_s": 30}).to_string());
        out.push('\n');
    }
    for (en, zh) in PROMPTS {
        let steps: Vec<&str> = en
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(6)
            .collect();
        out.push_str(&json!({"analysis": zh, "steps": steps}).to_string());
        out.push('\n');
        out.push_str(&json!({"step_id": "S2", "summary": en}).to_string());
        out.push('\n');
    }
    out
}

fn source_code() -> String {
    [CONTEXT_RS, BUDGET_RS].concat()
}

/// A deterministic stream of pseudo-random numbers (xorshift), so the table is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick(&mut self, alphabet: &[u8], len: usize) -> String {
        (0..len)
            .map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize] as char)
            .collect()
    }
}

/// Runs a model might emit without a space (its output is untrusted), at three lengths each.
fn runs(alphabet: &[u8], seed: u64) -> Vec<String> {
    let mut rng = Rng(seed);
    [64, 512, 4096]
        .into_iter()
        .map(|len| rng.pick(alphabet, len))
        .collect()
}

fn repeated(unit: &str) -> Vec<String> {
    [64, 512, 4096]
        .into_iter()
        .map(|len| unit.repeat(len / unit.len()))
        .collect()
}

/// `text` cut at line ends into pieces of about `size` bytes.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut piece = String::new();
    for line in text.split_inclusive('\n') {
        piece.push_str(line);
        if piece.len() >= size {
            out.push(std::mem::take(&mut piece));
        }
    }
    if !piece.trim().is_empty() {
        out.push(piece);
    }
    out
}

pub(crate) fn kinds() -> Vec<Kind> {
    let cut = |name, text: String| Kind {
        name,
        pieces: pieces(&text, 800),
    };
    vec![
        cut("English prose", english_prose()),
        cut("math / LaTeX", MATH.to_string()),
        cut("Python code", DRIVER_PY.to_string()),
        cut("Rust code", source_code()),
        cut("JSON tool arguments", tool_arguments()),
        cut("Chinese", chinese()),
        cut("mixed zh/en", mixed()),
        Kind {
            name: "run: one letter repeated",
            pieces: repeated("a"),
        },
        Kind {
            name: "run: random lowercase",
            pieces: runs(b"abcdefghijklmnopqrstuvwxyz", 0x9E37_79B9_7F4A_7C15),
        },
        Kind {
            name: "run: random base64",
            pieces: runs(
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                0x2545_F491_4F6C_DD1D,
            ),
        },
        Kind {
            name: "run: random hex",
            pieces: runs(b"0123456789abcdef", 0x1234_5678_9ABC_DEF1),
        },
        Kind {
            name: "run: a word repeated",
            pieces: repeated("solve"),
        },
        Kind {
            name: "run: one ideograph repeated",
            pieces: repeated("的"),
        },
    ]
}

/// The estimate's error against o200k for one kind.
pub(crate) struct Accuracy {
    pub(crate) name: &'static str,
    pub(crate) bytes: usize,
    pub(crate) exact: u64,
    pub(crate) estimated: u64,
    /// Mean of |estimate − exact| / exact over the pieces.
    pub(crate) mean_error: f64,
    /// The piece furthest below its exact count (negative: an under-estimate).
    pub(crate) worst_under: f64,
    /// The piece furthest above.
    pub(crate) worst_over: f64,
}

pub(crate) fn accuracy(bpe: &CoreBPE, kind: &Kind) -> Accuracy {
    let mut acc = Accuracy {
        name: kind.name,
        bytes: 0,
        exact: 0,
        estimated: 0,
        mean_error: 0.0,
        worst_under: f64::INFINITY,
        worst_over: f64::NEG_INFINITY,
    };
    for piece in &kind.pieces {
        let exact = bpe.encode_ordinary(piece).len() as u64;
        let estimated = deepsolve_core::count_tokens(piece);
        let error = (estimated as f64 - exact as f64) / exact.max(1) as f64;
        acc.bytes += piece.len();
        acc.exact += exact;
        acc.estimated += estimated;
        acc.mean_error += error.abs();
        acc.worst_under = acc.worst_under.min(error);
        acc.worst_over = acc.worst_over.max(error);
    }
    acc.mean_error /= kind.pieces.len().max(1) as f64;
    acc
}

/// Time per MiB of `count` over all pieces, repeated until enough text went through.
fn per_mib(kind: &Kind, count: &dyn Fn(&str) -> u64) -> f64 {
    let bytes: usize = kind.pieces.iter().map(String::len).sum();
    let rounds = (1 << 20) / bytes.max(1) + 1;
    let started = Instant::now();
    let mut sink = 0u64;
    for _ in 0..rounds {
        for piece in &kind.pieces {
            sink = sink.wrapping_add(count(std::hint::black_box(piece)));
        }
    }
    std::hint::black_box(sink);
    let mib = (bytes * rounds) as f64 / (1 << 20) as f64;
    started.elapsed().as_secs_f64() * 1e3 / mib
}

fn percent(x: f64) -> String {
    format!("{:+.1} %", x * 100.0)
}

pub(crate) fn print_table() -> anyhow::Result<()> {
    let built = Instant::now();
    let bpe = tiktoken_rs::o200k_base()?;
    let build_ms = built.elapsed().as_secs_f64() * 1e3;
    println!("## Token estimate vs exact o200k, per kind of text\n");
    println!(
        "| kind | pieces | KiB | o200k tokens | estimated | total error | mean abs error | worst under | worst over | estimate ms/MiB | o200k ms/MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for kind in kinds() {
        let a = accuracy(&bpe, &kind);
        let exact_speed = per_mib(&kind, &|t| bpe.encode_ordinary(t).len() as u64);
        let estimate_speed = per_mib(&kind, &deepsolve_core::count_tokens);
        println!(
            "| {} | {} | {:.1} | {} | {} | {} | {:.1} % | {} | {} | {:.2} | {:.1} |",
            a.name,
            kind.pieces.len(),
            a.bytes as f64 / 1024.0,
            a.exact,
            a.estimated,
            percent(a.estimated as f64 / a.exact.max(1) as f64 - 1.0),
            a.mean_error * 100.0,
            percent(a.worst_under),
            percent(a.worst_over),
            estimate_speed,
            exact_speed,
        );
    }
    println!(
        "\nBuilding the o200k tokenizer took {build_ms:.0} ms; the estimate needs nothing built."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per kind: the worst under-estimate allowed on any piece, and the largest mean error.
    /// Over-estimates are the safe side for context limits, so they are bounded only loosely.
    fn bounds(kind: &str) -> (f64, f64) {
        match kind {
            k if k.starts_with("run: one letter") || k.starts_with("run: a word") => (0.0, 5.0),
            k if k.starts_with("run:") => (-0.30, 0.30),
            _ => (0.0, 0.25),
        }
    }

    #[test]
    fn the_estimate_stays_close_to_o200k_and_rarely_under() {
        let bpe = tiktoken_rs::o200k_base().expect("o200k");
        for kind in kinds() {
            let a = accuracy(&bpe, &kind);
            let (min_under, max_mean) = bounds(a.name);
            assert!(
                a.worst_under >= min_under,
                "{}: a piece {:.1} % under o200k",
                a.name,
                a.worst_under * 100.0
            );
            assert!(
                a.mean_error <= max_mean,
                "{}: mean error {:.1} %",
                a.name,
                a.mean_error * 100.0
            );
        }
    }
}
