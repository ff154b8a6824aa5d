// read_file, write_file, list_directory: plain file access for agents that do
// not use the text editor, binary-safe. Text is returned as is when the bytes
// are valid UTF-8, base64 otherwise (the result says which), so a model never
// gets mangled bytes it would then write back.

import type { WorkspaceFiles } from "./files.js";
import { toWorkspacePath } from "./paths.js";
import type { ToolInput } from "./schemas.js";
import { fail, ok, type ToolResult } from "./types.js";

/** Default bound of read_file (bytes). */
export const DEFAULT_READ_BYTES = 1024 * 1024;

export class FileTools {
  constructor(
    private readonly files: WorkspaceFiles,
    private readonly roots: () => Promise<string[]>,
  ) {}

  async read(input: ToolInput<"read_file">): Promise<ToolResult> {
    const rel = toWorkspacePath(input.path, await this.roots());
    const all = await this.files.read(rel);
    const max = input.max_bytes ?? DEFAULT_READ_BYTES;
    const bytes = all.subarray(0, max);
    const cut =
      all.length > max
        ? `\n[cut: showing ${max} of ${all.length} bytes; raise max_bytes to read more]`
        : "";
    const text = utf8(bytes, all.length > max);
    if (text !== undefined) {
      return ok(`${text}${cut}`, { path: input.path, encoding: "utf8", size: all.length });
    }
    const b64 = Buffer.from(bytes).toString("base64");
    return ok(`[binary file, ${all.length} bytes, base64:]\n${b64}${cut}`, {
      path: input.path,
      encoding: "base64",
      size: all.length,
    });
  }

  async write(input: ToolInput<"write_file">): Promise<ToolResult> {
    const rel = toWorkspacePath(input.path, await this.roots());
    let data: Uint8Array;
    if (input.encoding === "base64") {
      const clean = input.content.replace(/\s+/g, "");
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(clean) || clean.length % 4 === 1) {
        return fail('content is not valid base64 (encoding is "base64").');
      }
      data = new Uint8Array(Buffer.from(clean, "base64"));
    } else {
      data = new TextEncoder().encode(input.content);
    }
    await this.files.write(rel, data);
    return ok(`Wrote ${data.length} bytes to ${input.path}.`, {
      path: input.path,
      size: data.length,
    });
  }

  async list(input: ToolInput<"list_directory">): Promise<ToolResult> {
    const shown = input.path ?? "";
    const rel = toWorkspacePath(shown, await this.roots());
    const entries = await this.files.list(rel);
    const lines = entries.map((e) =>
      e.type === "dir" ? `dir      ${e.name}/` : `${e.type.padEnd(8)} ${e.name}  ${e.size}`,
    );
    const title = `${shown || "the workspace root"}: ${entries.length} entries`;
    return ok(`${title}\n${lines.join("\n")}`, { path: shown, entries });
  }
}

/** Strict UTF-8 (a cut may end mid-character when `partial`), else undefined. */
function utf8(bytes: Uint8Array, partial: boolean): string | undefined {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: partial });
  } catch {
    return undefined;
  }
}
