// `str_replace_based_edit_tool` with Anthropic's text editor semantics: view
// (numbered lines, view_range, directory listing), create, str_replace
// (exactly one match, else say how many and where), insert (after a line, 0 =
// top). Every failure is a tool error whose text says what to change, since
// the reader is a model that will retry. Files go through WorkspaceFiles, so
// confinement is the workspace's (paths.ts for absolute paths, then
// resolveInWorkspace or the server's files API for `..` and symlinks).

import { ComputerError } from "../wire/errors.js";
import type { WorkspaceFiles } from "./files.js";
import { toWorkspacePath } from "./paths.js";
import type { ToolInput } from "./schemas.js";
import { fail, ok, type ToolResult } from "./types.js";

/** Longest view returned (characters); past it the view says to use view_range. */
export const MAX_VIEW_CHARS = 64 * 1024;
/** Lines of context shown around an edit. */
const SNIPPET_LINES = 4;
/** Depth of a directory view, as Anthropic's reference editor lists it. */
const DIR_DEPTH = 2;
/** Entries of a directory view at most. */
const DIR_LIMIT = 500;

export class TextEditor {
  constructor(
    private readonly files: WorkspaceFiles,
    private readonly roots: () => Promise<string[]>,
  ) {}

  async run(input: ToolInput<"str_replace_based_edit_tool">): Promise<ToolResult> {
    const rel = toWorkspacePath(input.path, await this.roots());
    switch (input.command) {
      case "view":
        return this.view(input.path, rel, input.view_range);
      case "create":
        if (input.file_text === undefined) return fail("create needs file_text (the whole file).");
        await this.files.write(rel, new TextEncoder().encode(input.file_text));
        return ok(`File created: ${input.path} (${lineCount(input.file_text)} lines).`);
      case "str_replace":
        return this.replace(input.path, rel, input.old_str, input.new_str ?? "");
      case "insert":
        return this.insert(input.path, rel, input.insert_line, input.insert_text);
    }
  }

  private async view(
    shown: string,
    rel: string,
    range: [number, number] | undefined,
  ): Promise<ToolResult> {
    let bytes: Uint8Array;
    try {
      bytes = await this.files.read(rel);
    } catch (err) {
      if ((err as { code?: string }).code !== "EISDIR") throw err;
      if (range) return fail(`${shown} is a directory; view_range applies to files only.`);
      return this.viewDir(shown, rel);
    }
    const text = decodeText(bytes, shown);
    const lines = splitLines(text);
    let start = 1;
    let end = lines.length;
    if (range) {
      const [s, e] = range;
      if (s > Math.max(lines.length, 1)) {
        return fail(
          `Invalid view_range [${s}, ${e}]: start ${s} is past the last line of ${shown} (${lines.length} lines).`,
        );
      }
      if (e !== -1 && (e < s || e > lines.length)) {
        return fail(
          `Invalid view_range [${s}, ${e}]: end must be -1 or between ${s} and ${lines.length} (the file has ${lines.length} lines).`,
        );
      }
      start = s;
      end = e === -1 ? lines.length : e;
    }
    let body = numbered(lines.slice(start - 1, end), start);
    let note = "";
    if (body.length > MAX_VIEW_CHARS) {
      body = body.slice(0, MAX_VIEW_CHARS);
      body = body.slice(0, body.lastIndexOf("\n") + 1);
      note = `\n[view cut at ${MAX_VIEW_CHARS} characters: use view_range to see the rest of the ${lines.length} lines]`;
    }
    return ok(`Here's the result of running \`cat -n\` on ${shown}:\n${body}${note}`);
  }

  private async viewDir(shown: string, rel: string): Promise<ToolResult> {
    const out: string[] = [];
    const walk = async (dir: string, depth: number) => {
      for (const e of await this.files.list(dir)) {
        if (out.length >= DIR_LIMIT) return;
        if (e.name.startsWith(".") || e.name === "node_modules") continue;
        const p = dir ? `${dir}/${e.name}` : e.name;
        out.push(e.type === "dir" ? `${p}/` : p);
        if (e.type === "dir" && depth < DIR_DEPTH) await walk(p, depth + 1);
      }
    };
    await walk(rel, 1);
    const more = out.length >= DIR_LIMIT ? `\n[listing stopped at ${DIR_LIMIT} entries]` : "";
    return ok(
      `Files and directories up to ${DIR_DEPTH} levels deep in ${shown}, excluding hidden items and node_modules (paths relative to the workspace):\n${out.join("\n")}${more}`,
    );
  }

  private async replace(
    shown: string,
    rel: string,
    oldStr: string | undefined,
    newStr: string,
  ): Promise<ToolResult> {
    if (oldStr === undefined || oldStr === "") {
      return fail("str_replace needs old_str: the exact, non-empty text to replace.");
    }
    const text = decodeText(await this.files.read(rel), shown);
    const at: number[] = [];
    for (let i = text.indexOf(oldStr); i !== -1; i = text.indexOf(oldStr, i + oldStr.length)) {
      at.push(i);
    }
    if (at.length === 0) {
      return fail(
        `No replacement was performed: old_str did not appear verbatim in ${shown}. Check whitespace and indentation, or view the file first.`,
      );
    }
    if (at.length > 1) {
      const lineNos = at.map((i) => lineAt(text, i));
      return fail(
        `No replacement was performed: old_str occurs ${at.length} times in ${shown} (lines ${lineNos.join(", ")}). Include more surrounding text so it matches exactly once.`,
      );
    }
    const i = at[0]!;
    const updated = text.slice(0, i) + newStr + text.slice(i + oldStr.length);
    await this.files.write(rel, new TextEncoder().encode(updated));
    const first = lineAt(updated, i);
    const last = first + lineCount(newStr) - 1;
    return ok(
      `The file ${shown} has been edited. ${snippet(updated, first, last)}Review the changes and make sure they are as expected.`,
    );
  }

  private async insert(
    shown: string,
    rel: string,
    insertLine: number | undefined,
    insertText: string | undefined,
  ): Promise<ToolResult> {
    if (insertLine === undefined) return fail("insert needs insert_line (0 inserts at the top).");
    if (insertText === undefined) return fail("insert needs insert_text.");
    const text = decodeText(await this.files.read(rel), shown);
    const lines = splitLines(text);
    if (insertLine > lines.length) {
      return fail(
        `Invalid insert_line ${insertLine}: ${shown} has ${lines.length} lines, so insert_line must be between 0 and ${lines.length}.`,
      );
    }
    const added = splitLines(insertText);
    const trailing = text === "" ? insertText.endsWith("\n") : text.endsWith("\n");
    const all = [...lines.slice(0, insertLine), ...added, ...lines.slice(insertLine)];
    const updated = all.join("\n") + (trailing && all.length > 0 ? "\n" : "");
    await this.files.write(rel, new TextEncoder().encode(updated));
    return ok(
      `The file ${shown} has been edited. ${snippet(updated, insertLine + 1, insertLine + added.length)}Review the changes and make sure they are as expected.`,
    );
  }
}

/** Strict UTF-8, or a tool error pointing to read_file for binary content. */
function decodeText(bytes: Uint8Array, shown: string): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new ComputerError(
      "EINVAL",
      `${shown} is not UTF-8 text; read it with read_file (base64) instead`,
    );
  }
}

/** Lines of a text; a final newline ends the last line rather than starting an empty one. */
function splitLines(text: string): string[] {
  if (text === "") return [];
  return (text.endsWith("\n") ? text.slice(0, -1) : text).split("\n");
}

function lineCount(text: string): number {
  return Math.max(1, splitLines(text).length);
}

/** 1-based line of character index `i`. */
function lineAt(text: string, i: number): number {
  let n = 1;
  for (let j = text.indexOf("\n"); j !== -1 && j < i; j = text.indexOf("\n", j + 1)) n++;
  return n;
}

function numbered(lines: string[], first: number): string {
  return lines.map((l, k) => `${String(first + k).padStart(6)}\t${l}\n`).join("");
}

/** The edited lines with a few lines of context, numbered. */
function snippet(text: string, first: number, last: number): string {
  const lines = splitLines(text);
  const from = Math.max(1, first - SNIPPET_LINES);
  const to = Math.min(lines.length, Math.max(last, first) + SNIPPET_LINES);
  return `Here's a snippet of the edited file (cat -n):\n${numbered(lines.slice(from - 1, to), from)}`;
}
