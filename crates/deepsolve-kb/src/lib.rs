//! Knowledge bases: a student's own material, turned into passages a solve can cite.
//!
//! - [`extract`]: a file's text, page by page (PDF out of process, DOCX, HTML, Markdown, text).
//! - [`chunk`]: pages into overlapping passages, each with its document, page and heading path.
//! - [`index`]: the per-replica full-text index, derived from the store and rebuilt when behind.
//! - [`retrieve`]: BM25, optional embeddings, fused by reciprocal rank.

pub mod chunk;
pub mod extract;
pub mod index;
pub mod retrieve;
