-- Browser sessions of the web UI (schema v2, SQLite). Keep in step with
-- migrations/postgres/0002_browser_sessions.sql. Like tokens, only the SHA-256 of a session's
-- secret is stored; the secret itself lives in the browser's HttpOnly cookie.

CREATE TABLE browser_sessions (
    secret_hash  TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL
);
CREATE INDEX browser_sessions_by_user ON browser_sessions (user_id, expires_at);
