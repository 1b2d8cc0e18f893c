//! `bench kb`: knowledge bases on a real SQLite store, the real PDF child and the real tantivy
//! index. Prints ingest throughput (pages per minute of a text PDF, by stage), query latency
//! on a 10 000-chunk KB (BM25 alone and hybrid with the test embedder), the index's size on
//! disk, the resident set, and retrieval quality (recall@5 and MRR) on a labelled question
//! set over notes written for it, BM25 against hybrid.
//!
//! `bench kb [--chunks N] [--queries N] [--pages N]`.

mod corpus;
pub(crate) mod ingest_size;
mod pdf;

use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use deepsolve_kb::extract::{ChildCommand, Limits};
use deepsolve_kb::index::KbIndexes;
use deepsolve_kb::retrieve::testing::HashEmbedder;
use deepsolve_kb::retrieve::{Embedder, Retriever, embed_missing};
use deepsolve_kb::{Ingestor, KbLimits};
use deepsolve_store::{
    KbDocumentStatus, KnowledgeBase, NewKbChunk, NewKbDocument, Store, StoreOptions,
};

use crate::procfs::parse_status_kib;
use crate::{percentile, rss_kib};

/// The hidden first argument that makes the bench binary the PDF parser's child process, as
/// the `deepsolve` binary's own hidden subcommand does: the bench measures the same path.
pub(crate) const PDF_CHILD: &str = "__pdf-child";

const USER: &str = "bench";
/// Dimension of the test embedder's vectors (a small real model's is 384 to 1 024).
const DIMENSION: usize = 256;
/// Words per synthetic chunk: about 130 estimated tokens, a short paragraph.
const WORDS_PER_CHUNK: usize = 100;
/// Chunks per synthetic document.
const CHUNKS_PER_DOC: usize = 100;
const INGEST_RUNS: usize = 3;

struct Opts {
    chunks: usize,
    queries: usize,
    pages: usize,
}

fn parse(args: &[String]) -> anyhow::Result<Opts> {
    let mut opts = Opts {
        chunks: 10_000,
        queries: 200,
        pages: 100,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || -> anyhow::Result<usize> {
            it.next()
                .with_context(|| format!("{flag} needs a number"))?
                .parse()
                .with_context(|| format!("{flag} needs a number"))
        };
        match flag.as_str() {
            "--chunks" => opts.chunks = value()?.max(1),
            "--queries" => opts.queries = value()?.max(1),
            "--pages" => opts.pages = value()?.max(1),
            other => {
                anyhow::bail!("unknown flag {other} (flags: --chunks N, --queries N, --pages N)")
            }
        }
    }
    Ok(opts)
}

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let opts = parse(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(drive(&opts))
}

async fn drive(opts: &Opts) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Store::open_sqlite(&dir.path().join("kb.db"), StoreOptions::default()).await?;
    let limits = limits()?;
    println!(
        "## Knowledge bases (SQLite store, PDF child process, tantivy index; {} build)\n",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    ingest_table(&store, &limits, opts.pages).await?;
    latency_table(&store, dir.path(), opts).await?;
    quality_table(&store, dir.path(), &limits).await?;
    store.close().await;
    Ok(())
}

/// Extraction as the `deepsolve` binary runs it, with this binary as the PDF child.
fn limits() -> anyhow::Result<Limits> {
    let program = std::env::current_exe().context("cannot find the bench executable")?;
    Ok(Limits {
        pdf_child: Some(ChildCommand {
            program,
            args: vec![OsString::from(PDF_CHILD)],
        }),
        ..Limits::default()
    })
}

/// Time spent in each stage of one document's ingest.
#[derive(Default, Clone, Copy)]
struct Stages {
    extract: Duration,
    chunk: Duration,
    store: Duration,
    total: Duration,
}

struct Ingested {
    pages: usize,
    chunks: usize,
    stages: Stages,
}

/// One document through the ingest the CLI and the server run (`Ingestor::add`, then `run`:
/// extract in the child, chunk, store pages and chunks, `ready`), timed by its progress
/// reports: each stage lasts until the next one is reported.
async fn ingest(
    store: &Store,
    ingestor: &Ingestor,
    kb: &KnowledgeBase,
    name: &str,
    bytes: &[u8],
) -> anyhow::Result<Ingested> {
    let marks: Mutex<Vec<(&'static str, Instant)>> = Mutex::new(Vec::new());
    let started = Instant::now();
    let doc = ingestor.add(USER, &kb.id, name, bytes.len() as u64).await?;
    let doc = ingestor
        .run(USER, &doc.id, bytes.to_vec(), &|p| {
            if let Ok(mut marks) = marks.lock() {
                marks.push((p.stage, Instant::now()));
            }
        })
        .await?;
    let total = started.elapsed();
    let marks = marks.into_inner().unwrap_or_else(|e| e.into_inner());
    let at = |stage: &str| marks.iter().find(|(s, _)| *s == stage).map(|(_, t)| *t);
    let between = |from: &str, to: &str| match (at(from), at(to)) {
        (Some(a), Some(b)) => b.saturating_duration_since(a),
        _ => Duration::ZERO,
    };
    let extract = between("extracting", "chunking");
    let chunk = between("chunking", "storing");
    let chunks = store.kb_document_chunks(&doc.id, USER).await?.len();
    Ok(Ingested {
        pages: doc.pages.unwrap_or(0) as usize,
        chunks,
        stages: Stages {
            extract,
            chunk,
            store: total.saturating_sub(extract + chunk),
            total,
        },
    })
}

/// A text PDF of `pages` full pages (about 40 lines each), from the question set's notes.
fn long_pdf(pages: usize) -> Vec<u8> {
    let notes: Vec<&str> = corpus::PDFS
        .iter()
        .flat_map(|d| d.pages.iter().copied())
        .collect();
    let texts: Vec<String> = (0..pages)
        .map(|i| {
            let mut page = format!("Page {}.\n\n", i + 1);
            for k in 0..4 {
                page.push_str(notes[(i + k) % notes.len()]);
                page.push_str("\n\n");
            }
            page
        })
        .collect();
    pdf::text_pdf(&texts)
}

async fn ingest_table(store: &Store, limits: &Limits, pages: usize) -> anyhow::Result<()> {
    let bytes = long_pdf(pages);
    let ingestor = Ingestor::new(store.clone(), limits.clone(), KbLimits::default(), None);
    let mut runs = Vec::new();
    let mut index_builds = Vec::new();
    let index_dir = tempfile::tempdir()?;
    for run in 0..INGEST_RUNS {
        let kb = store.create_kb(USER, &format!("ingest-{run}")).await?;
        let done = ingest(store, &ingestor, &kb, "notes.pdf", &bytes).await?;
        ensure!(done.pages == pages, "read {} of {pages} pages", done.pages);
        let started = Instant::now();
        KbIndexes::new(index_dir.path())
            .ensure_current(store, &kb)
            .await?;
        index_builds.push(started.elapsed());
        runs.push(done);
    }
    runs.sort_by_key(|r| r.stages.total);
    index_builds.sort();
    let median = &runs[runs.len() / 2];
    let per_min = |d: Duration| median.pages as f64 / d.as_secs_f64().max(1e-9) * 60.0;
    let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1e3);
    println!(
        "### Ingest: a {pages}-page text PDF ({} KiB, {} chunks), median of {INGEST_RUNS} runs\n",
        bytes.len() / 1024,
        median.chunks
    );
    println!("| stage | time | pages/min |");
    println!("|---|---|---|");
    let s = median.stages;
    for (name, d) in [
        ("extract (PDF child process)", s.extract),
        ("chunk", s.chunk),
        ("store (status, pages, chunks, ready)", s.store),
        ("**ingest total**", s.total),
        (
            "index build on first search",
            index_builds[index_builds.len() / 2],
        ),
    ] {
        println!("| {name} | {} | {:.0} |", ms(d), per_min(d));
    }
    println!();
    Ok(())
}

/// splitmix64: a deterministic stream of pseudo-random numbers, the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An index in `0..n` drawn log-uniformly between `n^lo` and `n^hi`: Zipf-like, so a few
    /// words are everywhere and most are rare, as in prose.
    fn zipf(&mut self, n: usize, lo: f64, hi: f64) -> usize {
        let u = lo + (hi - lo) * self.unit();
        ((n as f64).powf(u) as usize).saturating_sub(1).min(n - 1)
    }
}

/// Pseudo-words from syllables: distinct terms with English-like lengths.
fn vocabulary(n: usize) -> Vec<String> {
    const SYLLABLES: [&str; 20] = [
        "ka", "lo", "mi", "ne", "ru", "ta", "vo", "si", "pe", "du", "ga", "fi", "ho", "ze", "bar",
        "qu", "len", "tor", "wim", "sha",
    ];
    (0..n)
        .map(|mut i| {
            let mut word = String::new();
            loop {
                word.push_str(SYLLABLES[i % SYLLABLES.len()]);
                i /= SYLLABLES.len();
                if i == 0 {
                    break word;
                }
            }
        })
        .collect()
}

fn sentence(rng: &mut Rng, words: &[String], n: usize, lo: f64, hi: f64) -> String {
    (0..n)
        .map(|_| words[rng.zipf(words.len(), lo, hi)].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

async fn latency_table(store: &Store, dir: &Path, opts: &Opts) -> anyhow::Result<()> {
    let words = vocabulary(20_000);
    let mut rng = Rng(12);
    let kb = store.create_kb(USER, "latency").await?;
    let started = Instant::now();
    let mut made = 0;
    while made < opts.chunks {
        let n = CHUNKS_PER_DOC.min(opts.chunks - made);
        let doc = store
            .add_kb_document(
                &kb.id,
                USER,
                NewKbDocument {
                    name: format!("synthetic-{}.txt", made / CHUNKS_PER_DOC),
                    kind: "text".into(),
                    size: 0,
                    pages: Some(u32::try_from(n)?),
                },
            )
            .await?;
        let rows: Vec<NewKbChunk> = (0..n)
            .map(|i| NewKbChunk {
                ordinal: u32::try_from(i).unwrap_or(u32::MAX),
                page: u32::try_from(i + 1).ok(),
                heading_path: Vec::new(),
                text: sentence(&mut rng, &words, WORDS_PER_CHUNK, 0.0, 1.0),
            })
            .collect();
        store.insert_kb_chunks(&doc.id, USER, &rows).await?;
        store
            .set_kb_document_status(&doc.id, USER, KbDocumentStatus::Ready, None)
            .await?;
        made += n;
    }
    let stored = started.elapsed();
    let embedder = Arc::new(HashEmbedder::new("hash-256", DIMENSION));
    let started = Instant::now();
    embed_missing(store, &kb, embedder.as_ref()).await?;
    let embedded = started.elapsed();
    let kb = store.kb(&kb.id, USER).await?.context("the KB vanished")?;
    let root = dir.join("kb-index");
    let indexes = Arc::new(KbIndexes::new(&root));
    let started = Instant::now();
    indexes.ensure_current(store, &kb).await?;
    let indexed = started.elapsed();
    let index_bytes = dir_size(&root.join(&kb.id))?;

    let queries: Vec<String> = (0..opts.queries)
        .map(|_| sentence(&mut rng, &words, 3, 0.3, 0.9))
        .collect();
    let embedder: Arc<dyn Embedder> = embedder;
    let bm25 = Retriever::new(store.clone(), indexes.clone(), None);
    let hybrid = Retriever::new(store.clone(), indexes, Some(embedder));
    let bm25_times = time_queries(&bm25, &kb, &queries).await?;
    let hybrid_times = time_queries(&hybrid, &kb, &queries).await?;

    let ms = |d: Duration| format!("{:.2} ms", d.as_secs_f64() * 1e3);
    let s = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    println!(
        "### Queries on a {}-chunk KB ({WORDS_PER_CHUNK} words per chunk, {} queries of 3 words, top 5)\n",
        opts.chunks, opts.queries
    );
    println!("| retrieval | p50 | p99 | max |");
    println!("|---|---|---|---|");
    for (name, t) in [
        ("BM25 (tantivy)", &bm25_times),
        (
            "hybrid: BM25 + cosine over stored vectors (test embedder, 256 dims), RRF",
            &hybrid_times,
        ),
    ] {
        println!(
            "| {name} | {} | {} | {} |",
            ms(percentile(t, 0.5)),
            ms(percentile(t, 0.99)),
            ms(t[t.len() - 1])
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    println!("\n| metric | value |");
    println!("|---|---|");
    println!("| store the chunks (SQLite) | {} |", s(stored));
    println!("| embed every chunk (test embedder) | {} |", s(embedded));
    println!("| build the full-text index | {} |", s(indexed));
    println!(
        "| index size on disk | {:.1} MiB ({:.0} bytes per chunk) |",
        index_bytes as f64 / (1024.0 * 1024.0),
        index_bytes as f64 / opts.chunks as f64
    );
    println!("| RSS after the queries | {} |", mib(rss_kib()?));
    println!(
        "| peak RSS of the bench process | {} |",
        parse_status_kib(&status, "VmHWM:").map_or_else(|| "?".into(), mib)
    );
    println!();
    Ok(())
}

async fn time_queries(
    retriever: &Retriever,
    kb: &KnowledgeBase,
    queries: &[String],
) -> anyhow::Result<Vec<Duration>> {
    // One untimed query: the index is opened (not rebuilt) once, as on a running server.
    retriever
        .retrieve(std::slice::from_ref(kb), &queries[0], Some(5))
        .await?;
    let mut times = Vec::with_capacity(queries.len());
    for q in queries {
        let started = Instant::now();
        retriever
            .retrieve(std::slice::from_ref(kb), q, Some(5))
            .await?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times)
}

fn dir_size(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// Where a question's answer was found: its 1-based rank among the top 10, if at all.
async fn rank_of(
    retriever: &Retriever,
    kb: &KnowledgeBase,
    question: &corpus::Question,
) -> anyhow::Result<Option<usize>> {
    let found = retriever
        .retrieve(std::slice::from_ref(kb), question.text, Some(10))
        .await?;
    Ok(found
        .hits
        .iter()
        .position(|h| h.title == question.doc && h.page.unwrap_or(1) == question.page)
        .map(|i| i + 1))
}

#[derive(Default)]
struct Score {
    n: usize,
    first: usize,
    recalled: usize,
    reciprocal: f64,
}

impl Score {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(r) = rank {
            if r == 1 {
                self.first += 1;
            }
            if r <= 5 {
                self.recalled += 1;
            }
            self.reciprocal += 1.0 / r as f64;
        }
    }

    fn cells(&self) -> String {
        let n = self.n.max(1) as f64;
        format!(
            "{:.2} | {:.2} | {:.2}",
            self.first as f64 / n,
            self.recalled as f64 / n,
            self.reciprocal / n
        )
    }
}

async fn quality_table(store: &Store, dir: &Path, limits: &Limits) -> anyhow::Result<()> {
    let kb = store.create_kb(USER, "notes").await?;
    let ingestor = Ingestor::new(store.clone(), limits.clone(), KbLimits::default(), None);
    for doc in corpus::PDFS {
        let pages: Vec<String> = doc.pages.iter().map(|p| p.to_string()).collect();
        let bytes = pdf::text_pdf(&pages);
        ingest(store, &ingestor, &kb, doc.name, &bytes).await?;
    }
    for doc in corpus::MARKDOWN {
        let text = doc.pages.join("\n\n");
        ingest(store, &ingestor, &kb, doc.name, text.as_bytes()).await?;
    }
    let fixtures = corpus::fixtures();
    for (name, bytes) in &fixtures {
        ingest(store, &ingestor, &kb, name, bytes).await?;
    }
    let embedder = HashEmbedder::new("hash-256", DIMENSION);
    embed_missing(store, &kb, &embedder).await?;
    let kb = store.kb(&kb.id, USER).await?.context("the KB vanished")?;
    let indexes = Arc::new(KbIndexes::new(dir.join("kb-index-notes")));
    let embedder: Arc<dyn Embedder> = Arc::new(embedder);
    let bm25 = Retriever::new(store.clone(), indexes.clone(), None);
    let hybrid = Retriever::new(store.clone(), indexes, Some(embedder));
    let kinds = ["lexical", "paraphrase", "cross-lingual"];
    let mut scores: Vec<(Score, Score)> = kinds.iter().map(|_| Default::default()).collect();
    let mut all = (Score::default(), Score::default());
    for question in corpus::QUESTIONS {
        let b = rank_of(&bm25, &kb, question).await?;
        let h = rank_of(&hybrid, &kb, question).await?;
        if let Some(i) = kinds.iter().position(|k| *k == question.kind) {
            scores[i].0.add(b);
            scores[i].1.add(h);
        }
        all.0.add(b);
        all.1.add(h);
    }
    println!(
        "### Retrieval quality: {} labelled questions over {} documents (three English PDFs and three Chinese Markdown notes written for it, and the testkit's {} fixture documents on the same subjects)\n",
        corpus::QUESTIONS.len(),
        corpus::PDFS.len() + corpus::MARKDOWN.len() + fixtures.len(),
        fixtures.len()
    );
    println!(
        "| questions | n | BM25 recall@1 | BM25 recall@5 | BM25 MRR@10 | hybrid recall@1 | hybrid recall@5 | hybrid MRR@10 |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (kind, (b, h)) in kinds.iter().zip(&scores) {
        println!("| {kind} | {} | {} | {} |", b.n, b.cells(), h.cells());
    }
    println!(
        "| **all** | {} | {} | {} |",
        all.0.n,
        all.0.cells(),
        all.1.cells()
    );
    println!(
        "\nThe test embedder hashes the same analysed terms BM25 indexes, so hybrid here can only \
         re-weight lexical matches: it measures the fusion's cost and plumbing, not semantic \
         recall. A real embedding model (models.embedding) is what would lift the paraphrase \
         and cross-lingual rows, where no query term occurs on the answering page; it costs one \
         embedding call per query (tens of ms over the network) and one per chunk at ingest, \
         and the cosine scan grows with the KB (4 bytes per dimension per chunk, held in memory \
         per KB generation after the first query)."
    );
    Ok(())
}
