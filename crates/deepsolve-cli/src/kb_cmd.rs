//! `deepsolve kb …`: knowledge bases from the command line, in the same store (and for the same
//! user) as `deepsolve serve`, so a KB made here is searchable from the web UI and back.

use crate::exit::Exit;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use deepsolve_kb::{IngestProgress, KbError, Knowledge};
use deepsolve_protocol::api::{DocumentStatus, DocumentView, KbView, SearchHit};
use deepsolve_store::{KbDocument, KbDocumentStatus, KnowledgeBase, Store};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::ConfigArgs;
use crate::database::{DatabaseArgs, open_store};
use crate::output::{errln, outln};
use crate::setup::{knowledge, load_settings, user_id};

#[derive(Args)]
pub(crate) struct KbArgs {
    #[command(subcommand)]
    action: KbAction,
    /// Act as this user of the server (default: the single-user identity of a server without
    /// users).
    #[arg(long, global = true, value_name = "NAME")]
    user: Option<String>,
    /// Print JSON on stdout instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    config: ConfigArgs,
}

#[derive(Subcommand)]
enum KbAction {
    /// Create an empty knowledge base.
    Create { name: String },
    /// Add documents (PDF, DOCX, HTML, Markdown, text): each is read, split into passages and
    /// indexed, with its progress on stderr; one that fails is reported and the others go on.
    Add {
        /// The knowledge base's name or id.
        name: String,
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
    },
    /// List your knowledge bases.
    List,
    /// A knowledge base's documents: kind, pages, size, status, and why any failed.
    Show {
        /// The knowledge base's name or id.
        name: String,
    },
    /// The passages of a knowledge base that best match a query, best first.
    Search {
        /// The knowledge base's name or id.
        name: String,
        query: String,
        /// How many passages (1-20).
        #[arg(short = 'k', long = "top-k", value_name = "N", default_value_t = 5)]
        top_k: u32,
    },
    /// Delete a knowledge base, or only one of its documents.
    Remove {
        /// The knowledge base's name or id.
        name: String,
        /// A document's name or id: only it is deleted.
        document: Option<String>,
    },
}

/// Who acts on which store, and how the answer is printed.
struct KbContext {
    store: Store,
    knowledge: Knowledge,
    user_id: String,
    json: bool,
}

pub(crate) async fn run(args: KbArgs) -> anyhow::Result<Exit> {
    let loaded = load_settings(&args.config)?;
    let store = open_store(&args.database, &loaded.settings.server).await?;
    let user_id = user_id(&store, args.user.as_deref()).await?;
    let cx = KbContext {
        knowledge: knowledge(&loaded, store.clone())?,
        store,
        user_id,
        json: args.json,
    };
    let result = match args.action {
        KbAction::Create { name } => create(&cx, &name).await,
        KbAction::Add { name, files } => add(&cx, &name, &files).await,
        KbAction::List => list(&cx).await,
        KbAction::Show { name } => show(&cx, &name).await,
        KbAction::Search { name, query, top_k } => search(&cx, &name, &query, top_k).await,
        KbAction::Remove { name, document } => remove(&cx, &name, document.as_deref()).await,
    };
    cx.store.close().await;
    result
}

/// A KB of this user by id or name; unknown: an error listing the user's KBs.
async fn find_kb(cx: &KbContext, name_or_id: &str) -> anyhow::Result<KnowledgeBase> {
    let mut kbs = cx
        .knowledge
        .resolve_kbs(&cx.user_id, &[name_or_id.to_string()])
        .await
        .map_err(unknown_kb)?;
    kbs.pop()
        .with_context(|| format!("no knowledge base '{name_or_id}'"))
}

/// An unknown KB's error, with the way out when the user has none.
pub(crate) fn unknown_kb(e: KbError) -> anyhow::Error {
    match e {
        KbError::UnknownKb { name, available } if available.is_empty() => anyhow::anyhow!(
            "unknown knowledge base '{name}': you have none yet (deepsolve kb create NAME)"
        ),
        other => other.into(),
    }
}

async fn create(cx: &KbContext, name: &str) -> anyhow::Result<Exit> {
    let kb = cx.store.create_kb(&cx.user_id, name).await?;
    if cx.json {
        print_json(&kb_view(&kb, &[]))?;
    } else {
        outln!("created knowledge base '{}' ({})", kb.name, kb.id);
        errln!(
            "add documents with: deepsolve kb add {} FILE...",
            quoted(&kb.name)
        );
    }
    Ok(Exit::Answer)
}

async fn list(cx: &KbContext) -> anyhow::Result<Exit> {
    let mut rows = Vec::new();
    for kb in cx.store.list_kbs(&cx.user_id).await? {
        let documents = cx.store.kb_documents(&kb.id, &cx.user_id).await?;
        rows.push(kb_view(&kb, &documents));
    }
    if cx.json {
        print_json(&serde_json::json!({ "knowledge_bases": rows }))?;
        return Ok(Exit::Answer);
    }
    if rows.is_empty() {
        errln!("no knowledge bases yet (deepsolve kb create NAME)");
    }
    let width = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0);
    for row in &rows {
        outln!(
            "{:<width$}  {}  {}",
            row.name,
            counts(row),
            console::style(&row.id).dim()
        );
    }
    Ok(Exit::Answer)
}

/// "3 documents (2 ready, 1 failed)".
fn counts(kb: &KbView) -> String {
    let noun = if kb.documents == 1 {
        "document"
    } else {
        "documents"
    };
    let mut states = vec![format!("{} ready", kb.ready)];
    if kb.failed > 0 {
        states.push(format!("{} failed", kb.failed));
    }
    let pending = kb.documents - kb.ready - kb.failed;
    if pending > 0 {
        states.push(format!("{pending} in progress"));
    }
    format!("{} {noun} ({})", kb.documents, states.join(", "))
}

async fn show(cx: &KbContext, name: &str) -> anyhow::Result<Exit> {
    let kb = find_kb(cx, name).await?;
    let documents = cx.store.kb_documents(&kb.id, &cx.user_id).await?;
    if cx.json {
        let docs: Vec<DocumentView> = documents.iter().map(document_view).collect();
        print_json(&serde_json::json!({ "kb": kb_view(&kb, &documents), "documents": docs }))?;
        return Ok(Exit::Answer);
    }
    outln!(
        "{} {}  {}",
        console::style(&kb.name).bold(),
        console::style(format!("({})", kb.id)).dim(),
        counts(&kb_view(&kb, &documents))
    );
    let width = documents
        .iter()
        .map(|d| d.name.chars().count())
        .max()
        .unwrap_or(0);
    for doc in &documents {
        let pages = doc
            .pages
            .map_or_else(|| "-".to_string(), |p| format!("{p} p."));
        outln!(
            "  {:<width$}  {:<8}  {:>7}  {:>9}  {}",
            doc.name,
            doc.kind,
            pages,
            deepsolve_tools::human_size(doc.size),
            status_text(doc)
        );
    }
    Ok(Exit::Answer)
}

fn status_text(doc: &KbDocument) -> String {
    match doc.status {
        KbDocumentStatus::Failed => format!(
            "{} {}",
            console::style("failed:").red(),
            doc.error.as_deref().unwrap_or("no reason recorded")
        ),
        KbDocumentStatus::Ingesting => match doc.pages_total {
            Some(total) => format!("ingesting ({} of {total} pages)", doc.pages_done),
            None => "ingesting".into(),
        },
        other => other.as_str().to_string(),
    }
}

async fn remove(cx: &KbContext, name: &str, document: Option<&str>) -> anyhow::Result<Exit> {
    let kb = find_kb(cx, name).await?;
    let Some(document) = document else {
        cx.knowledge.delete_kb(&cx.user_id, &kb.id).await?;
        if cx.json {
            print_json(&serde_json::json!({ "removed": { "kb": kb.id } }))?;
        } else {
            outln!("removed knowledge base '{}'", kb.name);
        }
        return Ok(Exit::Answer);
    };
    let documents = cx.store.kb_documents(&kb.id, &cx.user_id).await?;
    let Some(doc) = documents
        .iter()
        .find(|d| d.id == document)
        .or_else(|| documents.iter().find(|d| d.name == document))
    else {
        let names: Vec<&str> = documents.iter().map(|d| d.name.as_str()).collect();
        bail!(
            "no document '{document}' in '{}' (its documents: {})",
            kb.name,
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
    };
    cx.store.delete_kb_document(&doc.id, &cx.user_id).await?;
    if cx.json {
        print_json(&serde_json::json!({ "removed": { "kb": kb.id, "document": doc.id } }))?;
    } else {
        outln!("removed '{}' from '{}'", doc.name, kb.name);
    }
    Ok(Exit::Answer)
}

/// A name as the shell would need it quoted.
fn quoted(name: &str) -> String {
    if name
        .chars()
        .all(|c| c.is_alphanumeric() || "-_.".contains(c))
    {
        name.to_string()
    } else {
        format!("'{}'", name.replace('\'', r"'\''"))
    }
}

pub(crate) fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A KB as the API shows it.
fn kb_view(kb: &KnowledgeBase, documents: &[KbDocument]) -> KbView {
    let with = |status| {
        let n = documents.iter().filter(|d| d.status == status).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    KbView {
        id: kb.id.clone(),
        name: kb.name.clone(),
        documents: u32::try_from(documents.len()).unwrap_or(u32::MAX),
        ready: with(KbDocumentStatus::Ready),
        failed: with(KbDocumentStatus::Failed),
        created_at: kb.created_at,
        updated_at: kb.updated_at,
        embedding_model: kb.embedding.as_ref().map(|e| e.model.clone()),
    }
}

/// A document as the API shows it.
fn document_view(doc: &KbDocument) -> DocumentView {
    DocumentView {
        id: doc.id.clone(),
        kb_id: doc.kb_id.clone(),
        name: doc.name.clone(),
        kind: doc.kind.clone(),
        size: doc.size,
        pages: doc.pages,
        status: match doc.status {
            KbDocumentStatus::Queued => DocumentStatus::Queued,
            KbDocumentStatus::Ingesting => DocumentStatus::Ingesting,
            KbDocumentStatus::Ready => DocumentStatus::Ready,
            KbDocumentStatus::Failed => DocumentStatus::Failed,
        },
        error: doc.error.clone(),
        pages_done: doc.pages_done,
        pages_total: doc.pages_total,
        created_at: doc.created_at,
    }
}

async fn add(cx: &KbContext, name: &str, files: &[PathBuf]) -> anyhow::Result<Exit> {
    let kb = find_kb(cx, name).await?;
    let mut documents = Vec::new();
    let mut failed = 0;
    for file in files {
        match ingest_file(&cx.knowledge, &cx.user_id, &kb, file).await {
            Ok(doc) => {
                if !cx.json {
                    outln!(
                        "added {} to '{}' ({})",
                        doc.name,
                        kb.name,
                        pages_text(doc.pages)
                    );
                }
                documents.push(document_view(&doc));
            }
            Err(failure) => {
                failed += 1;
                errln!("{} {}", console::style("error:").red(), failure.message);
                if let Some(doc) = failure.document {
                    documents.push(document_view(&doc));
                }
            }
        }
    }
    if cx.json {
        print_json(&serde_json::json!({ "documents": documents }))?;
    }
    Ok(if failed == 0 {
        Exit::Answer
    } else {
        Exit::Failure
    })
}

fn pages_text(pages: Option<u32>) -> String {
    match pages {
        Some(1) => "1 page".into(),
        Some(n) => format!("{n} pages"),
        None => "no pages".into(),
    }
}

/// Why a file was not added: "FILE: why" (the file as the user named it), and the document
/// left `failed` in the KB when it got that far.
pub(crate) struct IngestFailure {
    pub(crate) message: String,
    document: Option<KbDocument>,
}

/// One file into `kb`: recorded, read with its progress on stderr, `ready`.
pub(crate) async fn ingest_file(
    knowledge: &Knowledge,
    user_id: &str,
    kb: &KnowledgeBase,
    file: &Path,
) -> Result<KbDocument, IngestFailure> {
    let shown = file.display().to_string();
    let fail = |why: String, document: Option<KbDocument>| IngestFailure {
        message: format!("{shown}: {why}"),
        document,
    };
    let name = file
        .file_name()
        .map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned());
    // The size first: a file over the limit is refused before it is read.
    let size = std::fs::metadata(file)
        .map_err(|e| fail(io_reason(&e), None))?
        .len();
    let ingestor = knowledge.ingestor();
    let doc = ingestor
        .add(user_id, &kb.id, &name, size)
        .await
        .map_err(|e| fail(reason(&e.to_string(), &name), None))?;
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(e) => {
            let why = io_reason(&e);
            let message = format!("{name}: {why}");
            // Recorded but unreadable: it must not stay queued forever.
            let _ = knowledge
                .store()
                .set_kb_document_status(&doc.id, user_id, KbDocumentStatus::Failed, Some(&message))
                .await;
            return Err(fail(why, None));
        }
    };
    let progress = Progress::new(&name);
    let result = ingestor
        .run(user_id, &doc.id, bytes, &|p| progress.update(&p))
        .await;
    progress.finish();
    result.map_err(|e| {
        let failed = KbDocument {
            status: KbDocumentStatus::Failed,
            error: Some(e.to_string()),
            ..doc.clone()
        };
        fail(reason(&e.to_string(), &name), Some(failed))
    })
}

/// The ingest's message without the document name it starts with (the caller names the file
/// as the user typed it).
fn reason(message: &str, name: &str) -> String {
    message
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix(": "))
        .unwrap_or(message)
        .to_string()
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => format!("cannot read it: {e}"),
    }
}

/// A document's ingest on stderr: a bar of pages on a terminal, else a line per stage.
struct Progress {
    name: String,
    bar: Option<ProgressBar>,
    last_stage: Mutex<&'static str>,
}

impl Progress {
    fn new(name: &str) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("  {spinner:.cyan} {prefix} {msg} {pos}/{len} pages")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_prefix(name.to_string());
            bar.enable_steady_tick(std::time::Duration::from_millis(100));
            bar
        });
        Progress {
            name: name.to_string(),
            bar,
            last_stage: Mutex::new(""),
        }
    }

    fn update(&self, p: &IngestProgress) {
        if let Some(bar) = &self.bar {
            if let Some(total) = p.pages_total {
                bar.set_length(u64::from(total));
            }
            bar.set_position(u64::from(p.pages_done));
            bar.set_message(p.stage);
            return;
        }
        let Ok(mut last) = self.last_stage.lock() else {
            return;
        };
        if *last == p.stage {
            return;
        }
        *last = p.stage;
        let pages = match p.pages_total {
            Some(total) => format!(" ({}/{total} pages)", p.pages_done),
            None => String::new(),
        };
        errln!("{}: {}{pages}", self.name, p.stage);
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

async fn search(cx: &KbContext, name: &str, query: &str, top_k: u32) -> anyhow::Result<Exit> {
    let kb = find_kb(cx, name).await?;
    let found = cx
        .knowledge
        .search(
            &cx.user_id,
            std::slice::from_ref(&kb.id),
            query,
            Some(top_k),
        )
        .await?;
    if let Some(e) = &found.embedding_error {
        errln!("warning: full-text search only: the embedding model failed: {e}");
    }
    if !found.needs_reindex.is_empty() && cx.knowledge.embedding_model().is_some() {
        errln!(
            "warning: full-text search only: '{}' has no vectors of the configured embedding model yet",
            kb.name
        );
    }
    let hits: Vec<SearchHit> = found
        .hits
        .into_iter()
        .map(|h| SearchHit {
            section: (!h.heading_path.is_empty()).then(|| h.heading_path.join(" › ")),
            document_id: h.document_id,
            title: h.title,
            page: h.page,
            chunk_id: h.chunk_id,
            score: h.score,
            text: h.text,
        })
        .collect();
    if cx.json {
        print_json(&serde_json::json!({ "hits": hits }))?;
        return Ok(Exit::Answer);
    }
    if hits.is_empty() {
        errln!("no passage of '{}' matches", kb.name);
    }
    for (i, hit) in hits.iter().enumerate() {
        let mut head = format!("[{}] {}", i + 1, hit.title);
        if let Some(page) = hit.page {
            head.push_str(&format!(", p. {page}"));
        }
        if let Some(section) = &hit.section {
            head.push_str(&format!(" · {section}"));
        }
        outln!(
            "{} {}",
            console::style(head).bold(),
            console::style(format!("(score {:.4})", hit.score)).dim()
        );
        for line in excerpt(&hit.text).lines().filter(|l| !l.trim().is_empty()) {
            outln!("    {line}");
        }
    }
    Ok(Exit::Answer)
}

/// The start of a passage, at most a few lines, without control characters.
fn excerpt(text: &str) -> String {
    const CHARS: usize = 400;
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect();
    let mut out: String = clean.chars().take(CHARS).collect();
    if clean.chars().count() > CHARS {
        out.push('…');
    }
    out
}
