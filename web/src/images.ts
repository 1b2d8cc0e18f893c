// Images of a problem, checked in the page before they are sent: the type by the file's first
// bytes (as the server checks it, never by its name or declared type), the size against the
// server's cap, the count against its limit. The server checks again.

/** The image types a problem may carry (the server accepts exactly these). */
export const IMAGE_KINDS = ["image/png", "image/jpeg", "image/webp", "image/gif"] as const;

export type ImageKind = (typeof IMAGE_KINDS)[number];

/** The image type `head` (a file's first 12 bytes) starts with, or null. */
export function sniffImage(head: Uint8Array): ImageKind | null {
  const starts = (bytes: number[], at = 0) => bytes.every((b, i) => head[at + i] === b);
  const ascii = (text: string, at = 0) => starts([...text].map((c) => c.charCodeAt(0)), at);
  if (starts([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return "image/png";
  if (starts([0xff, 0xd8, 0xff])) return "image/jpeg";
  if (ascii("GIF87a") || ascii("GIF89a")) return "image/gif";
  if (head.length >= 12 && ascii("RIFF") && ascii("WEBP", 8)) return "image/webp";
  return null;
}

export type ImageLimits = { maxBytes: number; maxImages: number };

/** The server's defaults, until its capabilities say otherwise. */
export const DEFAULT_IMAGE_LIMITS: ImageLimits = { maxBytes: 10 * 1024 * 1024, maxImages: 8 };

/** Why a file was not taken. */
export type Refusal =
  | { reason: "notImage"; name: string }
  | { reason: "tooLarge"; name: string; size: number; max: number }
  | { reason: "tooMany"; max: number };

async function head(file: Blob): Promise<Uint8Array> {
  return new Uint8Array(await file.slice(0, 12).arrayBuffer());
}

/** `current` with those of `added` that are images within the limits (a file already there, by
 * name and size, is not added twice); the first refusal says why a file was left out. */
export async function addImages(
  current: File[],
  added: File[],
  limits: ImageLimits,
): Promise<{ images: File[]; refusal: Refusal | null }> {
  const images = [...current];
  let refusal: Refusal | null = null;
  const refuse = (why: Refusal) => {
    refusal ??= why;
  };
  for (const file of added) {
    if (images.some((f) => f.name === file.name && f.size === file.size)) continue;
    if (sniffImage(await head(file)) === null) refuse({ reason: "notImage", name: file.name });
    else if (file.size > limits.maxBytes) refuse({ reason: "tooLarge", name: file.name, size: file.size, max: limits.maxBytes });
    else if (images.length >= limits.maxImages) refuse({ reason: "tooMany", max: limits.maxImages });
    else images.push(file);
  }
  return { images, refusal };
}

/** The image files among a paste's or a drop's items (a copied screenshot has no name: it gets one). */
export function imageFiles(list: FileList | null | undefined): File[] {
  return Array.from(list ?? []).map((file, i) =>
    file.name ? file : new File([file], `pasted-${i + 1}.${(file.type.split("/")[1] ?? "png").replace("jpeg", "jpg")}`, { type: file.type }),
  );
}
