-- The images a turn was given (schema v6, SQLite). Keep in step with
-- migrations/postgres/0006_turn_images.sql.

-- Each image as the model was sent it (verified, at most 2 048 px long), so a resumed turn
-- sends the same bytes and the history shows them; `id` is the turn's own (`image_1`, …),
-- listed in the turn's spec. Deleted with the turn.
CREATE TABLE turn_images (
    turn_id     TEXT NOT NULL REFERENCES turns(id) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    position    BIGINT NOT NULL,
    name        TEXT NOT NULL,
    mime        TEXT NOT NULL,
    width       BIGINT NOT NULL,
    height      BIGINT NOT NULL,
    content     BLOB NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (turn_id, id)
);
