// Documents the browser tests upload, written by the tests themselves: a minimal text PDF
// (Helvetica, one content stream per page, a correct cross-reference table) and plain text.

function escapePdf(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\(/g, "\\(").replace(/\)/g, "\\)");
}

function stream(data: string): string {
  return `<< /Length ${Buffer.byteLength(data, "latin1")} >>\nstream\n${data}\nendstream`;
}

function pageContent(lines: string[]): string {
  const shown = lines.map((line) => `(${escapePdf(line)}) Tj T*`).join("\n");
  return `BT /F1 12 Tf 16 TL 72 720 Td\n${shown}\nET`;
}

/** A PDF with one page per entry, each page the given lines of ASCII text. */
export function textPdf(pages: string[][]): Buffer {
  const objects: string[] = [];
  const firstPage = 4;
  const kids = pages.map((_, i) => `${firstPage + 2 * i} 0 R`);
  objects.push("<< /Type /Catalog /Pages 2 0 R >>");
  objects.push(`<< /Type /Pages /Kids [${kids.join(" ")}] /Count ${pages.length} >>`);
  objects.push("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>");
  pages.forEach((lines, i) => {
    const contents = firstPage + 2 * i + 1;
    objects.push(
      `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${contents} 0 R >>`,
    );
    objects.push(stream(pageContent(lines)));
  });
  let out = "%PDF-1.7\n%\xE2\xE3\xCF\xD3\n";
  const offsets: number[] = [];
  objects.forEach((obj, i) => {
    offsets.push(Buffer.byteLength(out, "latin1"));
    out += `${i + 1} 0 obj\n${obj}\nendobj\n`;
  });
  const xref = Buffer.byteLength(out, "latin1");
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, "0")} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, "latin1");
}

/** Lecture notes on limits, three pages; the squeeze theorem is on page 2. */
export function lecturePdf(): Buffer {
  return textPdf([
    ["Lecture 3: Limits", "These notes cover limits of sequences.", "A sequence converges when its terms approach one number."],
    [
      "3.2 The squeeze theorem",
      "If a_n <= b_n <= c_n for every n and a_n and c_n both tend to L,",
      "then b_n tends to L as well. The squeeze theorem shows sin(n)/n tends to 0.",
    ],
    ["3.3 Exercises", "Show that cos(n)/n tends to 0 with the squeeze theorem."],
  ]);
}
