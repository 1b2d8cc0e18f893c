-- Knowledge bases, second part (schema v4, SQLite). Keep in step with
-- migrations/postgres/0004_kb_pages.sql.

-- A document's whole extracted text, page by page, in reading order: what `read_source` pages
-- through. Chunks overlap and skip nothing only by accident, so they cannot rebuild it.
-- `start_char` is where the page starts in the document's text, in characters.
CREATE TABLE kb_pages (
    document_id  TEXT NOT NULL REFERENCES kb_documents(id) ON DELETE CASCADE,
    ordinal      BIGINT NOT NULL,
    page         BIGINT,
    start_char   BIGINT NOT NULL,
    text         TEXT NOT NULL,
    PRIMARY KEY (document_id, ordinal)
);
CREATE INDEX kb_pages_by_start ON kb_pages (document_id, start_char);

-- Set for a turn's own attachments, a hidden knowledge base that `list_kbs` never shows.
ALTER TABLE knowledge_bases ADD COLUMN turn_id TEXT;
CREATE INDEX knowledge_bases_by_turn ON knowledge_bases (user_id, turn_id);

-- When a document's ingest last made progress (ms since the epoch): every status and progress
-- write touches it, and a live ingest touches it at least every minute, so the periodic
-- sweep fails only documents whose ingest died, not another replica's live one. Rows from
-- before it read as long stale.
ALTER TABLE kb_documents ADD COLUMN updated_at BIGINT NOT NULL DEFAULT 0;
CREATE INDEX kb_documents_unfinished ON kb_documents (status, updated_at);
