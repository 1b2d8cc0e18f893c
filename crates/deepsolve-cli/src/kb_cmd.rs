//! `deepsolve kb …`: knowledge bases from the command line, in the same store (and for the same
//! user) as `deepsolve serve`, so a KB made here is searchable from the web UI and back.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use deepsolve_store::{KbDocument, KbDocumentStatus, KnowledgeBase, Store};
use serde::Serialize;

use crate::ConfigArgs;
use crate::serve::{DatabaseArgs, open_store};
use crate::setup::load_settings;

/// The hidden first argument that makes this binary the PDF parser's child process
/// (`deepsolve_kb::extract::pdf_child_main`): the parser runs out of process, and the child
/// is this same executable, so an installed `deepsolve` needs no second binary beside it.
pub(crate) const PDF_CHILD: &str = "__pdf-child";

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
    /// List your knowledge bases.
    List,
    /// A knowledge base's documents: kind, pages, size, status, and why any failed.
    Show {
        /// The knowledge base's name or id.
        name: String,
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
pub(crate) struct KbContext {
    pub(crate) store: Store,
    pub(crate) user_id: String,
    pub(crate) json: bool,
}

pub(crate) async fn run(args: KbArgs) -> anyhow::Result<ExitCode> {
    let loaded = load_settings(&args.config)?;
    let store = open_store(&args.database, &loaded.settings.server).await?;
    let user_id = user_id(&store, args.user.as_deref()).await?;
    let cx = KbContext {
        store,
        user_id,
        json: args.json,
    };
    let result = match args.action {
        KbAction::Create { name } => create(&cx, &name).await,
        KbAction::List => list(&cx).await,
        KbAction::Show { name } => show(&cx, &name).await,
        KbAction::Remove { name, document } => remove(&cx, &name, document.as_deref()).await,
    };
    cx.store.close().await;
    result
}

/// The id of `--user NAME`, else the single-user identity.
async fn user_id(store: &Store, name: Option<&str>) -> anyhow::Result<String> {
    let Some(name) = name else {
        return Ok(deepsolve_server::LOCAL_USER.to_string());
    };
    match store.user_by_name(name).await? {
        Some(user) => Ok(user.id),
        None => bail!("no user named '{name}' (deepsolve users list shows them)"),
    }
}

/// A KB of this user by id or name; unknown: an error listing the user's KBs.
pub(crate) async fn find_kb(cx: &KbContext, name_or_id: &str) -> anyhow::Result<KnowledgeBase> {
    let kbs = cx.store.list_kbs(&cx.user_id).await?;
    if let Some(kb) = kbs
        .iter()
        .find(|kb| kb.id == name_or_id)
        .or_else(|| kbs.iter().find(|kb| kb.name == name_or_id))
    {
        return Ok(kb.clone());
    }
    if kbs.is_empty() {
        bail!("no knowledge base '{name_or_id}': you have none yet (deepsolve kb create NAME)");
    }
    let names: Vec<&str> = kbs.iter().map(|kb| kb.name.as_str()).collect();
    bail!(
        "no knowledge base '{name_or_id}' (yours: {})",
        names.join(", ")
    )
}

async fn create(cx: &KbContext, name: &str) -> anyhow::Result<ExitCode> {
    let kb = cx.store.create_kb(&cx.user_id, name).await?;
    if cx.json {
        print_json(&KbJson::of(&kb, &[]))?;
    } else {
        println!("created knowledge base '{}' ({})", kb.name, kb.id);
        eprintln!(
            "add documents with: deepsolve kb add {} FILE...",
            quoted(&kb.name)
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(cx: &KbContext) -> anyhow::Result<ExitCode> {
    let mut rows = Vec::new();
    for kb in cx.store.list_kbs(&cx.user_id).await? {
        let documents = cx.store.kb_documents(&kb.id, &cx.user_id).await?;
        rows.push(KbJson::of(&kb, &documents));
    }
    if cx.json {
        print_json(&serde_json::json!({ "knowledge_bases": rows }))?;
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        eprintln!("no knowledge bases yet (deepsolve kb create NAME)");
    }
    let width = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0);
    for row in &rows {
        println!(
            "{:<width$}  {}  {}",
            row.name,
            counts(row),
            console::style(&row.id).dim()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// "3 documents (2 ready, 1 failed)".
fn counts(kb: &KbJson) -> String {
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

async fn show(cx: &KbContext, name: &str) -> anyhow::Result<ExitCode> {
    let kb = find_kb(cx, name).await?;
    let documents = cx.store.kb_documents(&kb.id, &cx.user_id).await?;
    if cx.json {
        let docs: Vec<DocumentJson> = documents.iter().map(DocumentJson::of).collect();
        print_json(&serde_json::json!({ "kb": KbJson::of(&kb, &documents), "documents": docs }))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} {}  {}",
        console::style(&kb.name).bold(),
        console::style(format!("({})", kb.id)).dim(),
        counts(&KbJson::of(&kb, &documents))
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
        println!(
            "  {:<width$}  {:<8}  {:>7}  {:>9}  {}",
            doc.name,
            doc.kind,
            pages,
            deepsolve_tools::human_size(doc.size),
            status_text(doc)
        );
    }
    Ok(ExitCode::SUCCESS)
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

async fn remove(cx: &KbContext, name: &str, document: Option<&str>) -> anyhow::Result<ExitCode> {
    let kb = find_kb(cx, name).await?;
    let Some(document) = document else {
        cx.store.delete_kb(&kb.id, &cx.user_id).await?;
        remove_index(&kb.id).await;
        if cx.json {
            print_json(&serde_json::json!({ "removed": { "kb": kb.id } }))?;
        } else {
            println!("removed knowledge base '{}'", kb.name);
        }
        return Ok(ExitCode::SUCCESS);
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
        println!("removed '{}' from '{}'", doc.name, kb.name);
    }
    Ok(ExitCode::SUCCESS)
}

/// This machine's full-text indexes: a cache of the store, rebuilt from it when behind.
pub(crate) fn index_root() -> anyhow::Result<PathBuf> {
    Ok(deepsolve_app::data_dir()
        .context("no data directory for the knowledge base index")?
        .join("kb-index"))
}

/// A deleted KB's index is only a cache: failing to remove it is worth a warning, not an error.
async fn remove_index(kb_id: &str) {
    let Ok(root) = index_root() else { return };
    let indexes = deepsolve_kb::index::KbIndexes::new(root);
    if let Err(e) = indexes.remove(kb_id).await {
        eprintln!("warning: the knowledge base's index stays on disk: {e}");
    }
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
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A KB as `--json` prints it (the API's `KbView` fields).
#[derive(Serialize)]
pub(crate) struct KbJson {
    id: String,
    name: String,
    documents: usize,
    ready: usize,
    failed: usize,
    created_at: i64,
    updated_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    embedding_model: Option<String>,
}

impl KbJson {
    fn of(kb: &KnowledgeBase, documents: &[KbDocument]) -> KbJson {
        let with = |status| documents.iter().filter(|d| d.status == status).count();
        KbJson {
            id: kb.id.clone(),
            name: kb.name.clone(),
            documents: documents.len(),
            ready: with(KbDocumentStatus::Ready),
            failed: with(KbDocumentStatus::Failed),
            created_at: kb.created_at,
            updated_at: kb.updated_at,
            embedding_model: kb.embedding.as_ref().map(|e| e.model.clone()),
        }
    }
}

/// A document as `--json` prints it (the API's `DocumentView` fields).
#[derive(Serialize)]
pub(crate) struct DocumentJson {
    id: String,
    kb_id: String,
    name: String,
    kind: String,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pages: Option<u32>,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    pages_done: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pages_total: Option<u32>,
    created_at: i64,
}

impl DocumentJson {
    pub(crate) fn of(doc: &KbDocument) -> DocumentJson {
        DocumentJson {
            id: doc.id.clone(),
            kb_id: doc.kb_id.clone(),
            name: doc.name.clone(),
            kind: doc.kind.clone(),
            size: doc.size,
            pages: doc.pages,
            status: doc.status.as_str(),
            error: doc.error.clone(),
            pages_done: doc.pages_done,
            pages_total: doc.pages_total,
            created_at: doc.created_at,
        }
    }
}
