-- Knowledge bases (schema v3, SQLite). Keep in step with
-- migrations/postgres/0003_knowledge_bases.sql. The database is the source of truth for documents,
-- chunks and embeddings; every replica's full-text index is derived from these rows and
-- rebuilt when its recorded generation falls behind `knowledge_bases.generation`.

CREATE TABLE knowledge_bases (
    id                   TEXT PRIMARY KEY,
    user_id              TEXT NOT NULL,
    name                 TEXT NOT NULL,
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL,
    generation           BIGINT NOT NULL,
    embedding_model      TEXT,
    embedding_dimension  BIGINT,
    UNIQUE (user_id, name)
);

CREATE TABLE kb_documents (
    id           TEXT PRIMARY KEY,
    kb_id        TEXT NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    user_id      TEXT NOT NULL,
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    size         BIGINT NOT NULL,
    pages        BIGINT,
    status       TEXT NOT NULL,
    error        TEXT,
    pages_done   BIGINT NOT NULL,
    pages_total  BIGINT,
    created_at   BIGINT NOT NULL
);
CREATE INDEX kb_documents_by_kb ON kb_documents (kb_id, created_at);

-- heading_path is a JSON array of strings; embedding is little-endian f32s (NULL until
-- embedded). Ids are time-ordered, so `ORDER BY id` pages through a KB stably.
CREATE TABLE kb_chunks (
    id            TEXT PRIMARY KEY,
    document_id   TEXT NOT NULL REFERENCES kb_documents(id) ON DELETE CASCADE,
    kb_id         TEXT NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
    ordinal       BIGINT NOT NULL,
    page          BIGINT,
    heading_path  TEXT NOT NULL,
    text          TEXT NOT NULL,
    embedding     BLOB
);
CREATE INDEX kb_chunks_by_kb ON kb_chunks (kb_id, id);
CREATE INDEX kb_chunks_by_document ON kb_chunks (document_id, ordinal);
