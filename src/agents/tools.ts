// The agent tool set: one object that owns the per-caller state (the bash
// shell, each session's read position) and answers `call(name, input)` for
// every tool. MCP, the AI SDK adapter and plain JSON users all go through this
// one dispatcher, so validation, error text and semantics cannot drift
// between them.
//
// One AgentTools per agent conversation (per MCP connection): its bash shell
// and its "output since your last call" positions belong to that caller.

import { realpath } from "node:fs/promises";
import { z } from "zod";
import type { ComputerApi } from "../runtime/types.js";
import { ComputerError } from "../wire/errors.js";
import { BashShell, DEFAULT_BASH_TIMEOUT_MS } from "./bash.js";
import { TextEditor } from "./editor.js";
import { FileTools } from "./file-tools.js";
import type { WorkspaceFiles } from "./files.js";
import { DEFAULT_PROGRESS_INTERVAL_MS } from "./progress.js";
import { DEFAULT_MAX_OUTPUT_BYTES, TOOL_NAMES, TOOL_SPECS, type ToolName } from "./schemas.js";
import { SessionTools } from "./sessions.js";
import { fail, type ToolCallContext, type ToolResult } from "./types.js";

/** A tool as plain JSON: what every model API's tool definition is made from. */
export interface ToolDefinition {
  name: ToolName;
  description: string;
  /** JSON Schema (draft 2020-12 subset) of the input object. */
  inputSchema: Record<string, unknown>;
}

export interface AgentToolsOptions {
  computer: ComputerApi;
  files: WorkspaceFiles;
  /**
   * Absolute path(s) of the workspace as commands see it, so absolute paths
   * given to the file tools can be mapped into it. When absent it is asked
   * once from the computer (`pwd -P` in the workspace).
   */
  workspaceRoot?: string | string[];
  /** Bound of one `bash` command (default 120000 ms). */
  bashTimeoutMs?: number;
  /** Output budget of a `bash` result (default 32 KiB). */
  bashMaxOutputBytes?: number;
  /** Progress tick while a call waits silently (default 5000 ms). */
  progressIntervalMs?: number;
}

export class AgentTools {
  /** Every tool as name, description and JSON Schema. */
  readonly definitions: ToolDefinition[] = TOOL_DEFINITIONS;
  private readonly sessions: SessionTools;
  private readonly bash: BashShell;
  private readonly editor: TextEditor;
  private readonly fileTools: FileTools;
  private rootsP: Promise<string[]> | undefined;

  constructor(private readonly options: AgentToolsOptions) {
    const progressIntervalMs = options.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS;
    const roots = () => this.roots();
    this.sessions = new SessionTools({ computer: options.computer, roots, progressIntervalMs });
    this.bash = new BashShell({
      computer: options.computer,
      timeoutMs: options.bashTimeoutMs ?? DEFAULT_BASH_TIMEOUT_MS,
      maxOutputBytes: options.bashMaxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
      progressIntervalMs,
    });
    this.editor = new TextEditor(options.files, roots);
    this.fileTools = new FileTools(options.files, roots);
  }

  /**
   * Runs one tool. `input` is the arguments object (or its JSON text, as
   * OpenAI sends it). Never throws: bad input, unknown tools and failures are
   * results with `isError` and text that says what to change.
   */
  async call(name: string, input: unknown, ctx: ToolCallContext = {}): Promise<ToolResult> {
    if (!(TOOL_NAMES as string[]).includes(name)) {
      return fail(`Unknown tool ${JSON.stringify(name)}. The tools are: ${TOOL_NAMES.join(", ")}.`);
    }
    const tool = name as ToolName;
    let args = input ?? {};
    if (typeof args === "string") {
      try {
        args = JSON.parse(args || "{}");
      } catch {
        return fail(`The arguments of ${tool} are not valid JSON.`);
      }
    }
    const parsed = TOOL_SPECS[tool].schema.safeParse(args);
    if (!parsed.success) {
      return fail(`Invalid arguments for ${tool}:\n${z.prettifyError(parsed.error)}`);
    }
    try {
      return await this.dispatch(tool, parsed.data, ctx);
    } catch (err) {
      return fail(describeFailure(err));
    }
  }

  /** Stops what this tool set started for itself (its bash shell). */
  async close(): Promise<void> {
    await this.bash.close();
  }

  private dispatch(tool: ToolName, args: unknown, ctx: ToolCallContext): Promise<ToolResult> {
    // biome-ignore lint/suspicious/noExplicitAny: args was validated by TOOL_SPECS[tool].schema
    const a = args as any;
    switch (tool) {
      case "exec_command":
        return this.sessions.execCommand(a, ctx);
      case "write_stdin":
        return this.sessions.writeStdin(a, ctx);
      case "read_output":
        return this.sessions.readOutput(a);
      case "kill_session":
        return this.sessions.killSession(a, ctx);
      case "list_sessions":
        return this.sessions.listSessions();
      case "bash":
        return this.bash.run(a, ctx);
      case "str_replace_based_edit_tool":
        return this.editor.run(a);
      case "read_file":
        return this.fileTools.read(a);
      case "write_file":
        return this.fileTools.write(a);
      case "list_directory":
        return this.fileTools.list(a);
    }
  }

  private roots(): Promise<string[]> {
    this.rootsP ??= this.findRoots().catch((err) => {
      this.rootsP = undefined; // try again next time
      throw err;
    });
    return this.rootsP;
  }

  private async findRoots(): Promise<string[]> {
    const given = this.options.workspaceRoot;
    if (given !== undefined) {
      const list = Array.isArray(given) ? given : [given];
      const real = await Promise.all(list.map((p) => realpath(p).catch(() => p)));
      return [...new Set([...list, ...real])];
    }
    const h = await this.options.computer.exec("pwd -P", { encoding: "utf8" });
    const r = await h.result();
    await this.options.computer.dispose(h.id).catch(() => {});
    const pwd = String(r.stdout).trim();
    if (r.exitCode !== 0 || !pwd.startsWith("/")) {
      throw new ComputerError("EINTERNAL", "cannot learn the workspace's absolute path");
    }
    return [pwd];
  }
}

/** The JSON Schemas, derived once from the zod schemas. */
const TOOL_DEFINITIONS: ToolDefinition[] = TOOL_NAMES.map((name) => ({
  name,
  description: TOOL_SPECS[name].description,
  inputSchema: jsonSchemaOf(TOOL_SPECS[name].schema),
}));

function jsonSchemaOf(schema: z.ZodType): Record<string, unknown> {
  const s = z.toJSONSchema(schema, { io: "input" }) as Record<string, unknown>;
  delete s.$schema;
  // zod spells "any integer" as the safe-integer range; models need none of that noise.
  return JSON.parse(JSON.stringify(s), (key, value) =>
    (key === "maximum" && value === Number.MAX_SAFE_INTEGER) ||
    (key === "minimum" && value === Number.MIN_SAFE_INTEGER)
      ? undefined
      : value,
  );
}

/** A failure as text a model can act on. */
function describeFailure(err: unknown): string {
  if (err instanceof ComputerError || typeof (err as { code?: unknown })?.code === "string") {
    const e = err as ComputerError;
    const hint =
      e.code === "ENOENT" && /execution/i.test(e.message)
        ? " list_sessions shows the sessions that exist."
        : e.code === "EFORBIDDEN"
          ? " Only paths inside the workspace can be used."
          : "";
    const stop = /[.!?]$/.test(e.message) ? "" : ".";
    return `Error (${e.code}): ${e.message}${stop}${hint}`;
  }
  return `Error: ${(err as Error)?.message ?? String(err)}`;
}
