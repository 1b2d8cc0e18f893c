// The page's own check of a problem's images: by their first bytes, within the size cap and
// the count, each file once.
import { describe, expect, it } from "vitest";
import { addImages, imageFiles, sniffImage } from "./images";

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13];
const bytes = (text: string) => [...text].map((c) => c.charCodeAt(0));

function file(name: string, content: number[], size = content.length): File {
  const padded = new Uint8Array(Math.max(size, content.length));
  padded.set(content);
  return new File([padded], name, { type: "image/png" });
}

describe("sniffImage", () => {
  it("knows the four types by their magic bytes only", () => {
    expect(sniffImage(new Uint8Array(PNG))).toBe("image/png");
    expect(sniffImage(new Uint8Array([0xff, 0xd8, 0xff, 0xe0]))).toBe("image/jpeg");
    expect(sniffImage(new Uint8Array(bytes("GIF89a......")))).toBe("image/gif");
    expect(sniffImage(new Uint8Array(bytes("RIFF\0\0\0\0WEBP")))).toBe("image/webp");
    expect(sniffImage(new Uint8Array(bytes("RIFF\0\0\0\0WAVE")))).toBeNull();
    expect(sniffImage(new Uint8Array(bytes("<svg xmlns=")))).toBeNull();
    expect(sniffImage(new Uint8Array([]))).toBeNull();
  });
});

describe("addImages", () => {
  const limits = { maxBytes: 1000, maxImages: 2 };

  it("takes images and names the first file it leaves out", async () => {
    const a = file("a.png", PNG);
    const text = file("notes.png", bytes("Find angle C"));
    const added = await addImages([], [a, text], limits);
    expect(added.images).toEqual([a]);
    expect(added.refusal).toEqual({ reason: "notImage", name: "notes.png" });
  });

  it("refuses one over the size cap, and more than the limit", async () => {
    const big = file("big.png", PNG, 2000);
    expect((await addImages([], [big], limits)).refusal).toEqual({ reason: "tooLarge", name: "big.png", size: 2000, max: 1000 });
    const three = [file("1.png", PNG), file("2.png", PNG, 20), file("3.png", PNG, 30)];
    const added = await addImages([], three, limits);
    expect(added.images.map((f) => f.name)).toEqual(["1.png", "2.png"]);
    expect(added.refusal).toEqual({ reason: "tooMany", max: 2 });
  });

  it("adds the same file once", async () => {
    const a = file("a.png", PNG);
    const again = await addImages([a], [file("a.png", PNG)], limits);
    expect(again).toEqual({ images: [a], refusal: null });
  });
});

describe("imageFiles", () => {
  it("names a pasted image that has no name", () => {
    const pasted = new File([new Uint8Array(PNG)], "", { type: "image/png" });
    const named = imageFiles([pasted] as unknown as FileList);
    expect(named[0].name).toBe("pasted-1.png");
    expect(imageFiles(null)).toEqual([]);
  });
});
