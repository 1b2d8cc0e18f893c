// The turn's stored files (with ids) for the tool cards, which only know workspace paths.
import { createContext } from "preact";
import type { Artifact, ArtifactView } from "../protocol";
import { IMAGE_KINDS } from "../images";

export const ArtifactsContext = createContext<ArtifactView[]>([]);

function basename(path: string): string {
  const parts = path.split("/");
  return parts[parts.length - 1] ?? path;
}

/** The stored file a tool's workspace path names, if the turn has stored it yet. */
export function findStored(stored: ArtifactView[], file: Artifact): ArtifactView | null {
  const exact = stored.find((a) => a.name === file.path || a.name.endsWith(`/${file.path}`));
  if (exact) return exact;
  const name = basename(file.path);
  return stored.find((a) => basename(a.name) === name) ?? null;
}

const INLINE_IMAGES: ReadonlySet<string> = new Set(IMAGE_KINDS);

export function isInlineImage(mime: string): boolean {
  return INLINE_IMAGES.has(mime.toLowerCase());
}

/**
 * A figure deepsolve drew itself (a `geogebra_analysis` SVG: the tool recorded the hash of
 * what it wrote). The server serves it inline only after checking that hash against the
 * stored bytes, so any other SVG — one model code wrote in the workspace — stays a download.
 */
export function isOurFigure(file: Artifact): boolean {
  return file.mime.toLowerCase() === "image/svg+xml" && typeof file.rendered_sha256 === "string";
}
