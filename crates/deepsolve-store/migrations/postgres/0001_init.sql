-- deepsolve schema v1 (PostgreSQL). Keep in step with migrations/sqlite/0001_init.sql: the two
-- differ only in type names (BLOB/BYTEA), so one query path serves both backends.
-- Times are milliseconds since the Unix epoch (BIGINT); JSON documents are TEXT.

CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE tokens (
    id            TEXT PRIMARY KEY,
    user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_hash    TEXT NOT NULL UNIQUE,
    label         TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    revoked_at    BIGINT
);

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    user_id     TEXT NOT NULL,
    title       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL
);
CREATE INDEX sessions_by_user ON sessions (user_id, updated_at);

CREATE TABLE turns (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    user_id      TEXT NOT NULL,
    problem      TEXT NOT NULL,
    spec         TEXT NOT NULL,
    status       TEXT NOT NULL,
    answer       TEXT,
    stop_reason  TEXT,
    usage        TEXT,
    solve        TEXT,
    rounds       BIGINT NOT NULL DEFAULT 0,
    elapsed_ms   BIGINT NOT NULL DEFAULT 0,
    error        TEXT,
    owner        TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    finished_at  BIGINT
);
CREATE INDEX turns_by_session ON turns (session_id, created_at);
CREATE INDEX turns_by_status ON turns (status, owner);

CREATE TABLE turn_events (
    turn_id  TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    seq      BIGINT NOT NULL,
    kind     TEXT NOT NULL,
    ts       BIGINT NOT NULL,
    data     TEXT NOT NULL,
    PRIMARY KEY (turn_id, seq)
);

CREATE TABLE artifacts (
    id          TEXT PRIMARY KEY,
    turn_id     TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    user_id     TEXT NOT NULL,
    name        TEXT NOT NULL,
    mime        TEXT NOT NULL,
    size        BIGINT NOT NULL,
    content     BYTEA NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX artifacts_by_turn ON artifacts (turn_id);
