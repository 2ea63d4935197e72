/**
 * The Content-Disposition of a file's download: its name's last path segment (never a path a client
 * would write to), as ASCII in `filename` (others replaced) and whole in `filename*` (RFC 6266 / 5987).
 */
export function attachmentDisposition(filename: string): string {
  const base =
    filename
      .split(/[/\\]/)
      .filter((part) => part !== "" && part !== "." && part !== "..")
      .at(-1) ?? "file";
  const ascii = base.replace(/[^\x20-\x7e]|["\\%]/g, "_");
  const encoded = encodeURIComponent(base).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return ascii === base ? `attachment; filename="${ascii}"` : `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}
