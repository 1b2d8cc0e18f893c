//! Knowledge bases: a student's own material, turned into passages a solve can cite.
//!
//! - [`extract`]: a file's text, page by page (PDF out of process, DOCX, HTML, Markdown, text).
//! - [`chunk`]: pages into overlapping passages, each with its document, page and heading path.
//! - [`index`]: the per-replica full-text index, derived from the store and rebuilt when behind.
//! - [`retrieve`]: BM25, optional embeddings, fused by reciprocal rank.
//! - [`ingest`]: a document into a knowledge base (recorded, read, stored, `ready` or `failed`
//!   with a message naming it).
//! - [`Knowledge`]: the service the tools and the interfaces use (search, read, a turn's
//!   material and attachments, the ingestor).

pub mod chunk;
pub mod extract;
pub mod index;
pub mod ingest;
mod knowledge;
pub mod retrieve;

pub use ingest::{
    DEFAULT_INGEST_TIMEOUT, INGEST_HEARTBEAT, IngestError, IngestProgress, Ingestor, KbLimits,
    shorten_name,
};
pub use knowledge::{ATTACHMENTS, KbError, Knowledge, SourceText};
pub use retrieve::{Embedder, Hit, Retrieval};
