// Pictures of the problem: pasted into the editor, dropped on it, or chosen with a button;
// shown as thumbnails that can be removed; checked in the page (type by the file's bytes,
// size, count) with a message that names the file. Sent with the turn as `image` parts.
import { useEffect, useRef, useState } from "preact/hooks";
import { useCapabilities, valueOf } from "../capabilities";
import { formatBytes } from "../format";
import { useI18n, type Translate } from "../i18n";
import {
  addImages,
  DEFAULT_IMAGE_LIMITS,
  IMAGE_KINDS,
  imageFiles,
  type ImageLimits,
  type Refusal,
} from "../images";
import type { TurnImageView } from "../protocol";
import { FormError } from "./ErrorMessage";

export type ProblemImages = {
  images: File[];
  error: string | null;
  add: (files: File[]) => Promise<void>;
  remove: (file: File) => void;
  clear: () => void;
  /** The editor's handlers: paste and drop add images; `dragging` while files hover it. */
  editor: {
    dragging: boolean;
    onPaste: (event: ClipboardEvent) => void;
    onDragOver: (event: DragEvent) => void;
    onDragLeave: () => void;
    onDrop: (event: DragEvent) => void;
  };
};

function refusalText(refusal: Refusal, t: Translate): string {
  switch (refusal.reason) {
    case "notImage":
      return t("images.notImage", { name: refusal.name });
    case "tooLarge":
      return t("images.tooLarge", { name: refusal.name, size: formatBytes(refusal.size), max: formatBytes(refusal.max) });
    case "tooMany":
      return t("images.tooMany", { max: refusal.max });
  }
}

function carriesFiles(event: DragEvent): boolean {
  return Array.from(event.dataTransfer?.types ?? []).includes("Files");
}

/** A problem's images and the editor's paste and drop handlers that add to them. */
export function useProblemImages(): ProblemImages {
  const { t } = useI18n();
  const { caps } = useCapabilities();
  const limitsView = valueOf(caps)?.limits;
  const limits: ImageLimits = limitsView
    ? { maxBytes: limitsView.max_image_bytes, maxImages: limitsView.max_images }
    : DEFAULT_IMAGE_LIMITS;
  const [images, setImages] = useState<File[]>([]);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const [dragging, setDragging] = useState(false);
  // The list as the last add left it: two adds in a row must not drop the first's files.
  const latest = useRef<File[]>([]);

  async function add(files: File[]) {
    if (files.length === 0) return;
    const added = await addImages(latest.current, files, limits);
    latest.current = added.images;
    setImages(added.images);
    setRefusal(added.refusal);
  }

  function set(next: File[]) {
    latest.current = next;
    setImages(next);
    setRefusal(null);
  }

  return {
    images,
    error: refusal ? refusalText(refusal, t) : null,
    add,
    remove: (file) => set(latest.current.filter((f) => f !== file)),
    clear: () => set([]),
    editor: {
      dragging,
      onPaste: (event) => {
        const files = imageFiles(event.clipboardData?.files);
        if (files.length === 0) return;
        // A pasted picture is an image of the problem, not text for the editor.
        if (!event.clipboardData?.types.includes("text/plain")) event.preventDefault();
        void add(files);
      },
      onDragOver: (event) => {
        if (!carriesFiles(event)) return;
        event.preventDefault();
        setDragging(true);
      },
      onDragLeave: () => setDragging(false),
      onDrop: (event) => {
        setDragging(false);
        if (!carriesFiles(event)) return;
        event.preventDefault();
        void add(imageFiles(event.dataTransfer?.files));
      },
    },
  };
}

/** One thumbnail: the file shown from an object URL made for it, and let go with it. */
function Thumbnail(props: { file: File; alt: string }) {
  const [url, setUrl] = useState<string | null>(null);
  useEffect(() => {
    const made = URL.createObjectURL(props.file);
    setUrl(made);
    return () => URL.revokeObjectURL(made);
  }, [props.file]);
  return url ? <img class="thumb-img" src={url} alt={props.alt} /> : null;
}

/** The "Add images" button, the thumbnails with their remove buttons, and the page's message. */
export function ImagePicker(props: { idPrefix: string; state: ProblemImages; disabled?: boolean }) {
  const { t } = useI18n();
  const { state } = props;
  const input = useRef<HTMLInputElement>(null);
  const inputId = `${props.idPrefix}-images`;
  return (
    <div class="problem-images" data-testid="image-picker">
      <div class="problem-images-bar">
        <label class={`button subtle small${props.disabled ? " disabled" : ""}`} for={inputId}>
          {t("images.add")}
        </label>
        <input
          ref={input}
          id={inputId}
          class="visually-hidden-input"
          type="file"
          multiple
          disabled={props.disabled}
          data-testid="image-input"
          accept={IMAGE_KINDS.join(",")}
          onChange={(event) => {
            const files = Array.from((event.currentTarget as HTMLInputElement).files ?? []);
            void state.add(files);
            if (input.current) input.current.value = "";
          }}
        />
        <span class="muted small">{t("images.hint")}</span>
      </div>
      {state.images.length > 0 && (
        <ul class="thumbs" aria-label={t("images.label")} data-testid="image-thumbs">
          {state.images.map((file, i) => (
            <li key={`${file.name}:${file.size}`} class="thumb" data-testid="image-thumb" data-name={file.name}>
              <Thumbnail file={file} alt={t("images.alt", { n: i + 1, name: file.name })} />
              <span class="thumb-name small" title={file.name}>
                {file.name}
              </span>
              <button
                type="button"
                class="chip-remove thumb-remove"
                disabled={props.disabled}
                aria-label={t("images.remove", { name: file.name })}
                title={t("images.remove", { name: file.name })}
                onClick={() => state.remove(file)}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      {state.error && <FormError text={state.error} id={`${props.idPrefix}-image-error`} />}
    </div>
  );
}

/** A turn's images, above its problem, as the model was sent them. */
export function TurnImages(props: { images: TurnImageView[] }) {
  const { t } = useI18n();
  if (props.images.length === 0) return null;
  return (
    <ul class="turn-images" aria-label={t("turn.images")} data-testid="turn-images">
      {props.images.map((image, i) => (
        <li key={image.id}>
          <a href={image.url} target="_blank" rel="noopener noreferrer">
            <img
              src={image.url}
              alt={t("images.alt", { n: i + 1, name: image.name })}
              width={image.width}
              height={image.height}
              loading="lazy"
              data-testid="turn-image"
            />
          </a>
        </li>
      ))}
    </ul>
  );
}
