//! `/api/v1/knowledge-bases…`: a user's knowledge bases, their documents (uploaded as
//! `multipart/form-data`, ingested in the background: [`crate::ingest`]) and search. A
//! knowledge base is named in a path by its id or its name; another user's knowledge base or
//! document is a 404 on every route, exactly like a missing one.

use std::sync::Arc;

use axum::Json;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use deepsolve_protocol::api::{
    ApiErrorCode, CreateKb, DocumentStatus, DocumentView, DocumentsAccepted, KbDetail, KbList,
    KbView, SearchHit, SearchKb, SearchResults,
};
use deepsolve_store::{KbDocument, KbDocumentStatus, KnowledgeBase};

use crate::ingest::IngestRequest;
use crate::upload::{Upload, read_parts};
use deepsolve_kb::{Hit, IngestError, KbError, Knowledge};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::ApiJson;
use crate::state::AppState;

type AppStateRef = State<Arc<AppState>>;

pub(crate) fn document_view(doc: KbDocument) -> DocumentView {
    DocumentView {
        status: match doc.status {
            KbDocumentStatus::Queued => DocumentStatus::Queued,
            KbDocumentStatus::Ingesting => DocumentStatus::Ingesting,
            KbDocumentStatus::Ready => DocumentStatus::Ready,
            KbDocumentStatus::Failed => DocumentStatus::Failed,
        },
        id: doc.id,
        kb_id: doc.kb_id,
        name: doc.name,
        kind: doc.kind,
        size: doc.size,
        pages: doc.pages,
        error: doc.error,
        pages_done: doc.pages_done,
        pages_total: doc.pages_total,
        created_at: doc.created_at,
    }
}

fn count(docs: &[KbDocument], status: KbDocumentStatus) -> u32 {
    let n = docs.iter().filter(|d| d.status == status).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn kb_view(kb: KnowledgeBase, docs: &[KbDocument]) -> KbView {
    KbView {
        id: kb.id,
        name: kb.name,
        documents: u32::try_from(docs.len()).unwrap_or(u32::MAX),
        ready: count(docs, KbDocumentStatus::Ready),
        failed: count(docs, KbDocumentStatus::Failed),
        created_at: kb.created_at,
        updated_at: kb.updated_at,
        embedding_model: kb.embedding.map(|e| e.model),
    }
}

/// The caller's knowledge base named `key` (its id, else its name). A turn's hidden
/// attachments are not one: they belong to the turn (and go with it).
pub(crate) async fn caller_kb(
    state: &AppState,
    caller: &Caller,
    key: &str,
) -> ApiResult<KnowledgeBase> {
    if let Some(kb) = state.store.kb(key, &caller.user_id).await? {
        if kb.turn_id.is_some() {
            return Err(ApiError::not_found("knowledge base"));
        }
        return Ok(kb);
    }
    state
        .store
        .list_kbs(&caller.user_id)
        .await?
        .into_iter()
        .find(|kb| kb.name == key)
        .ok_or_else(|| ApiError::not_found("knowledge base"))
}

/// The caller's document `doc_id` of the knowledge base `kb`.
async fn caller_document(
    state: &AppState,
    caller: &Caller,
    kb: &KnowledgeBase,
    doc_id: &str,
) -> ApiResult<KbDocument> {
    state
        .store
        .kb_document(doc_id, &caller.user_id)
        .await?
        .filter(|doc| doc.kb_id == kb.id)
        .ok_or_else(|| ApiError::not_found("document"))
}

pub async fn list_kbs(State(state): AppStateRef, caller: Caller) -> ApiResult<Json<KbList>> {
    let mut views = Vec::new();
    for kb in state.store.list_kbs(&caller.user_id).await? {
        let docs = state.store.kb_documents(&kb.id, &caller.user_id).await?;
        views.push(kb_view(kb, &docs));
    }
    Ok(Json(KbList {
        knowledge_bases: views,
    }))
}

pub async fn create_kb(
    State(state): AppStateRef,
    caller: Caller,
    ApiJson(req): ApiJson<CreateKb>,
) -> ApiResult<Response> {
    let kb = state.store.create_kb(&caller.user_id, &req.name).await?;
    Ok((StatusCode::CREATED, Json(kb_view(kb, &[]))).into_response())
}

pub async fn get_kb(
    State(state): AppStateRef,
    caller: Caller,
    Path(key): Path<String>,
) -> ApiResult<Json<KbDetail>> {
    let kb = caller_kb(&state, &caller, &key).await?;
    let docs = state.store.kb_documents(&kb.id, &caller.user_id).await?;
    let kb = kb_view(kb, &docs);
    Ok(Json(KbDetail {
        kb,
        documents: docs.into_iter().map(document_view).collect(),
    }))
}

pub async fn delete_kb(
    State(state): AppStateRef,
    caller: Caller,
    Path(key): Path<String>,
) -> ApiResult<StatusCode> {
    let kb = caller_kb(&state, &caller, &key).await?;
    // Its documents' ingests stop first, so none writes into what is being deleted.
    state.ingest.cancel_kb(&kb.id);
    // Through the service when there is one: it drops this replica's index with the rows.
    let deleted = match state.app.knowledge() {
        Some(knowledge) => knowledge
            .delete_kb(&caller.user_id, &kb.id)
            .await
            .map_err(kb_error)?,
        None => state.store.delete_kb(&kb.id, &caller.user_id).await?,
    };
    if deleted {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("knowledge base"))
    }
}

pub async fn get_document(
    State(state): AppStateRef,
    caller: Caller,
    Path((key, doc_id)): Path<(String, String)>,
) -> ApiResult<Json<DocumentView>> {
    let kb = caller_kb(&state, &caller, &key).await?;
    let doc = caller_document(&state, &caller, &kb, &doc_id).await?;
    Ok(Json(document_view(doc)))
}

pub async fn delete_document(
    State(state): AppStateRef,
    caller: Caller,
    Path((key, doc_id)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let kb = caller_kb(&state, &caller, &key).await?;
    let doc = caller_document(&state, &caller, &kb, &doc_id).await?;
    // Its ingest stops first (within a poll, CPU-bound work included).
    state.ingest.cancel_document(&doc.id);
    if state
        .store
        .delete_kb_document(&doc.id, &caller.user_id)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("document"))
    }
}

/// The server's knowledge service, or 503 when it has none.
pub(crate) fn knowledge(state: &AppState) -> ApiResult<Knowledge> {
    state.app.knowledge().cloned().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ApiErrorCode::Unavailable,
            "knowledge bases are not available on this server",
        )
    })
}

/// An ingest refusal as an API error: its message names the document and the problem (a
/// file over the cap is a 413, like one refused while it arrived).
pub(crate) fn ingest_error(e: IngestError) -> ApiError {
    match e {
        IngestError::TooLarge { .. } => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ApiErrorCode::PayloadTooLarge,
            e.to_string(),
        ),
        IngestError::UnknownKb(_) => ApiError::not_found("knowledge base"),
        IngestError::Store { .. } => {
            tracing::error!(error = %e, "ingest: store error");
            ApiError::internal()
        }
        other => ApiError::invalid(ApiErrorCode::Invalid, other.to_string()),
    }
}

/// A knowledge-service error as an API error: an unknown knowledge base is the caller's
/// mistake (422 naming theirs), the rest the server's.
pub(crate) fn kb_error(e: KbError) -> ApiError {
    match e {
        KbError::UnknownKb { .. } | KbError::UnknownDocument(_) => {
            ApiError::invalid(ApiErrorCode::InvalidRequest, e.to_string())
        }
        other => {
            tracing::error!(error = %other, "knowledge service error");
            ApiError::internal()
        }
    }
}

fn not_multipart(rejection: MultipartRejection) -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ApiErrorCode::UnsupportedMediaType,
        format!(
            "send multipart/form-data with one part 'file' per document ({})",
            rejection.body_text()
        ),
    )
}

/// `POST …/documents`: record every file `queued` (all or none), answer 202 and ingest them
/// in the background.
pub async fn upload_documents(
    State(state): AppStateRef,
    caller: Caller,
    Path(key): Path<String>,
    multipart: Result<Multipart, MultipartRejection>,
) -> ApiResult<Response> {
    let knowledge = knowledge(&state)?;
    let kb = caller_kb(&state, &caller, &key).await?;
    let parts = read_parts(
        multipart.map_err(not_multipart)?,
        state.config.kb.caps(),
        None,
    )
    .await?;
    if parts.files.is_empty() {
        return Err(ApiError::invalid(
            ApiErrorCode::InvalidRequest,
            format!(
                "no part 'file': send 1 to {} files",
                state.config.kb.max_files
            ),
        ));
    }
    let docs = add_all(&state, &knowledge, &caller, &kb, &parts.files).await?;
    for (doc, file) in docs.iter().zip(parts.files) {
        let request = IngestRequest {
            user_id: caller.user_id.clone(),
            kb_id: doc.kb_id.clone(),
            document_id: doc.id.clone(),
            bytes: file.bytes,
        };
        state
            .ingest
            .spawn(knowledge.clone(), state.store.clone(), request);
    }
    let body = DocumentsAccepted {
        documents: docs.into_iter().map(document_view).collect(),
    };
    Ok((StatusCode::ACCEPTED, Json(body)).into_response())
}

/// Record `files` as queued documents of `kb`; when one is refused, the ones recorded before
/// it are deleted again (a refused request leaves nothing queued that nothing will ingest).
pub(crate) async fn add_all(
    state: &AppState,
    knowledge: &Knowledge,
    caller: &Caller,
    kb: &KnowledgeBase,
    files: &[Upload],
) -> ApiResult<Vec<KbDocument>> {
    let mut docs = Vec::with_capacity(files.len());
    for file in files {
        let added = knowledge
            .ingestor()
            .add(&caller.user_id, &kb.id, &file.name, file.bytes.len() as u64)
            .await;
        match added {
            Ok(doc) => docs.push(doc),
            Err(e) => {
                for doc in &docs {
                    if let Err(e) = state
                        .store
                        .delete_kb_document(&doc.id, &caller.user_id)
                        .await
                    {
                        tracing::warn!(document_id = doc.id, error = %e, "refused upload not undone");
                    }
                }
                return Err(ingest_error(e));
            }
        }
    }
    Ok(docs)
}

pub(crate) fn section_of(heading_path: &[String]) -> Option<String> {
    (!heading_path.is_empty()).then(|| heading_path.join(" › "))
}

fn search_hit(hit: Hit) -> SearchHit {
    SearchHit {
        section: section_of(&hit.heading_path),
        document_id: hit.document_id,
        title: hit.title,
        page: hit.page,
        chunk_id: hit.chunk_id,
        score: hit.score,
        text: hit.text,
    }
}

pub async fn search_kb(
    State(state): AppStateRef,
    caller: Caller,
    Path(key): Path<String>,
    ApiJson(req): ApiJson<SearchKb>,
) -> ApiResult<Json<SearchResults>> {
    let knowledge = knowledge(&state)?;
    let kb = caller_kb(&state, &caller, &key).await?;
    if req.query.trim().is_empty() {
        return Err(ApiError::invalid(
            ApiErrorCode::InvalidRequest,
            "'query' is empty",
        ));
    }
    let found = knowledge
        .search(&caller.user_id, &[kb.id], &req.query, req.top_k)
        .await
        .map_err(kb_error)?;
    Ok(Json(SearchResults {
        hits: found.hits.into_iter().map(search_hit).collect(),
    }))
}
