//! `bench kb-ingest`: how ingest time grows with a document's size, for a text with no break
//! point at all (one character repeated: a base64 image pasted into Markdown, at its worst)
//! and for ordinary Markdown prose; `html-image` is an HTML page holding such a run as an
//! inline image (`<img src="data:…">`), read by the HTML extractor. Each row is one document through `Ingestor::run` on a real
//! SQLite store (extract, chunk, store, `ready`), printed as soon as it ends, so a run stopped
//! by `timeout` still shows the rows it finished.
//!
//! `bench kb-ingest [--mib 1,8,49] [--content run,prose,html-image]`.

use std::time::Instant;

use anyhow::Context;
use deepsolve_kb::extract::Limits;
use deepsolve_kb::{Ingestor, KbLimits};
use deepsolve_store::{Store, StoreOptions};

const USER: &str = "bench";

struct Opts {
    mib: Vec<usize>,
    contents: Vec<String>,
}

fn parse(args: &[String]) -> anyhow::Result<Opts> {
    let mut opts = Opts {
        mib: vec![1, 8, 49],
        contents: vec!["run".into(), "prose".into()],
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a comma-separated list"))?;
        match flag.as_str() {
            "--mib" => {
                opts.mib = value
                    .split(',')
                    .map(|v| v.trim().parse().context("--mib takes whole MiB"))
                    .collect::<anyhow::Result<_>>()?;
            }
            "--content" => opts.contents = value.split(',').map(str::to_string).collect(),
            other => {
                anyhow::bail!("unknown flag {other} (flags: --mib 1,8,49, --content run,prose)")
            }
        }
    }
    Ok(opts)
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let opts = parse(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(drive(&opts))
}

/// About `size` bytes of `content` and the file name it is uploaded as: `run` is one letter
/// repeated; `prose` is Markdown sections of paragraphs of sentences; `html-image` a page
/// with a paragraph and an inline image of `size` base64 characters.
fn document(content: &str, size: usize) -> anyhow::Result<(Vec<u8>, &'static str)> {
    match content {
        "run" => Ok((vec![b'x'; size], "doc.md")),
        "prose" => Ok((prose(size).into_bytes(), "doc.md")),
        "html-image" => {
            let mut page = b"<html><head><title>Notes</title></head><body><h1>Notes</h1>\
                <p>A paragraph about limits and series.</p><img src=\"data:image/png;base64,"
                .to_vec();
            page.extend(std::iter::repeat_n(b'A', size));
            page.extend_from_slice(b"\"></body></html>");
            Ok((page, "doc.html"))
        }
        other => anyhow::bail!("unknown content {other} (run, prose, html-image)"),
    }
}

fn prose(size: usize) -> String {
    const WORDS: [&str; 16] = [
        "the",
        "integral",
        "converges",
        "because",
        "each",
        "term",
        "is",
        "bounded",
        "by",
        "a",
        "geometric",
        "series",
        "whose",
        "ratio",
        "stays",
        "below",
    ];
    let mut text = String::with_capacity(size + 256);
    let mut n = 0usize;
    while text.len() < size {
        if n.is_multiple_of(400) {
            text.push_str(&format!("\n## Section {}\n\n", n / 400 + 1));
        }
        let len = 8 + n % 13;
        for k in 0..len {
            let word = WORDS[(n * 7 + k * 3) % WORDS.len()];
            text.push_str(word);
            text.push(if k + 1 == len { '.' } else { ' ' });
        }
        text.push_str(if n % 6 == 5 { "\n\n" } else { " " });
        n += 1;
    }
    text.truncate(size);
    text
}

async fn drive(opts: &Opts) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open_sqlite(&dir.path().join("kb.db"), StoreOptions::default()).await?;
    let ingestor = Ingestor::new(store.clone(), Limits::default(), KbLimits::default(), None);
    println!(
        "### Ingest time by document size (SQLite store; {} build)\n",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    println!("| content | size | result | chunks | time |");
    println!("|---|---|---|---|---|");
    for content in &opts.contents {
        for &mib in &opts.mib {
            let (bytes, name) = document(content, mib * 1024 * 1024)?;
            let kb = store.create_kb(USER, &format!("{content}-{mib}")).await?;
            let doc = ingestor.add(USER, &kb.id, name, bytes.len() as u64).await?;
            let started = Instant::now();
            let result = ingestor.run(USER, &doc.id, bytes, &|_| {}).await;
            let elapsed = started.elapsed();
            let (outcome, chunks) = match result {
                Ok(doc) => (
                    "ready".to_string(),
                    store.kb_document_chunks(&doc.id, USER).await?.len(),
                ),
                Err(e) => (format!("failed: {e}"), 0),
            };
            println!(
                "| {content} | {mib} MiB | {outcome} | {chunks} | {:.1} s |",
                elapsed.as_secs_f64()
            );
        }
    }
    println!();
    store.close().await;
    Ok(())
}
