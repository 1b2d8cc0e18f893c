-- Where an artifact came from (schema v5, PostgreSQL). Keep in step with
-- migrations/sqlite/0005_artifact_origin.sql.

-- 'workspace': a file a tool found in the turn's workspace (model code may have written it:
-- always a download, or an image shown only when its bytes are a raster image).
-- 'rendered': a figure deepsolve drew itself (a geogebra_analysis SVG), whose stored bytes had
-- the hash the tool recorded when it wrote them: shown inline.
ALTER TABLE artifacts ADD COLUMN origin TEXT NOT NULL DEFAULT 'workspace';
