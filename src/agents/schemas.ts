// The input schemas of the agent tools, one zod schema per tool, with the
// descriptions a model reads. Everything that exposes the tools (MCP, the AI
// SDK, plain JSON Schema for Anthropic/OpenAI) derives its schema from these,
// and the one dispatcher validates every call with them, so a shape cannot
// differ between transports.
//
// Names and fields follow the tool shapes models are trained on (Codex's
// unified exec: exec_command/write_stdin; Anthropic's bash and
// str_replace_based_edit_tool), so a model needs no new habits. Objects are
// strict: an unknown field is a tool error naming it, not silently ignored.

import { z } from "zod";

/** Default wait of exec_command before it returns a running session (ms). */
export const DEFAULT_EXEC_YIELD_MS = 10_000;
/** Default wait of write_stdin (ms): short, it is mostly used to poll. */
export const DEFAULT_POLL_YIELD_MS = 250;
/** Default output budget of one result (bytes, about 8k tokens). */
export const DEFAULT_MAX_OUTPUT_BYTES = 32 * 1024;
/** Upper bound of any output budget a caller may ask for (bytes). */
export const MAX_OUTPUT_BYTES_LIMIT = 4 * 1024 * 1024;
/** Upper bound of a yield (ms); progress notifications keep MCP clients waiting that long. */
export const MAX_YIELD_MS = 30 * 60_000;

const sessionId = z
  .string()
  .min(1)
  .describe("The session_id an earlier exec_command returned (the execution id).");
const maxBytes = z
  .int()
  .min(256)
  .max(MAX_OUTPUT_BYTES_LIMIT)
  .describe(
    `Output budget of this result in bytes (default ${DEFAULT_MAX_OUTPUT_BYTES}). Over it, the head and tail are kept and one marker line says how to read the rest with read_output.`,
  );
const yieldMs = (def: number) =>
  z
    .int()
    .min(0)
    .max(MAX_YIELD_MS)
    .describe(
      `Wait at most this long for the command to finish (default ${def}); returns at once when it exits.`,
    );

export const execCommandInput = z.strictObject({
  cmd: z.string().min(1).describe("Shell command line, run by /bin/sh -c in the workspace."),
  workdir: z
    .string()
    .optional()
    .describe("Working directory: relative to the workspace, or an absolute path inside it."),
  env: z.record(z.string(), z.string()).optional().describe("Extra environment variables."),
  timeout_ms: z
    .int()
    .min(1)
    .optional()
    .describe("Kill the command after this many ms (default: no limit; it keeps running)."),
  yield_time_ms: yieldMs(DEFAULT_EXEC_YIELD_MS).optional(),
  max_output_bytes: maxBytes.optional(),
  tty: z
    .boolean()
    .optional()
    .describe(
      "Run on a pseudo-terminal (120x40): for programs that need a terminal; write_stdin input is typed into it (\\u0003 is Ctrl-C).",
    ),
});

export const writeStdinInput = z.strictObject({
  session_id: sessionId,
  chars: z
    .string()
    .optional()
    .describe(
      'Text to send to the command\'s stdin; empty to just poll for output. A "\\u0004" (Ctrl-D) closes stdin.',
    ),
  yield_time_ms: yieldMs(DEFAULT_POLL_YIELD_MS).optional(),
  max_output_bytes: maxBytes.optional(),
});

export const readOutputInput = z.strictObject({
  session_id: sessionId,
  after_seq: z
    .int()
    .min(0)
    .optional()
    .describe("Return output events with seq > after_seq (default 0: from the start)."),
  max_bytes: z
    .int()
    .min(1)
    .max(MAX_OUTPUT_BYTES_LIMIT)
    .optional()
    .describe(
      `At most this many bytes (default ${DEFAULT_MAX_OUTPUT_BYTES}), in whole events; the result says where to continue.`,
    ),
});

export const killSessionInput = z.strictObject({
  session_id: sessionId,
  signal: z
    .string()
    .regex(/^SIG[A-Z0-9]+$/)
    .optional()
    .describe('Signal for the process group (default "SIGTERM"; SIGKILL follows after a grace).'),
});

export const listSessionsInput = z.strictObject({});

export const bashInput = z.strictObject({
  command: z
    .string()
    .optional()
    .describe("The bash command to run. Required unless restart is true."),
  restart: z.boolean().optional().describe("Start a fresh shell (cd, exports, functions reset)."),
});

const line = z.int().describe("1-based line number");
export const editorInput = z.strictObject({
  command: z.enum(["view", "create", "str_replace", "insert"]),
  path: z
    .string()
    .min(1)
    .describe("File or directory: relative to the workspace, or absolute inside it."),
  file_text: z.string().optional().describe("create: the whole content of the file."),
  old_str: z
    .string()
    .optional()
    .describe("str_replace: the exact text to replace (must match once)."),
  new_str: z.string().optional().describe("str_replace: the replacement (default empty)."),
  insert_line: z
    .int()
    .min(0)
    .optional()
    .describe("insert: insert after this line (0 = at the top)."),
  insert_text: z.string().optional().describe("insert: the text to insert."),
  view_range: z
    .tuple([line.min(1), line.min(-1)])
    .optional()
    .describe("view: [start, end] lines, 1-based, inclusive; end -1 means to the end."),
});

export const readFileInput = z.strictObject({
  path: z.string().min(1).describe("File: relative to the workspace, or absolute inside it."),
  max_bytes: z
    .int()
    .min(1)
    .max(MAX_OUTPUT_BYTES_LIMIT)
    .optional()
    .describe("Return at most this many bytes (default 1 MiB); the result says when it was cut."),
});

export const writeFileInput = z.strictObject({
  path: z.string().min(1).describe("File: relative to the workspace, or absolute inside it."),
  content: z.string().describe("The new content (the file is created or replaced)."),
  encoding: z
    .enum(["utf8", "base64"])
    .optional()
    .describe('"utf8" (default) or "base64" for binary content.'),
});

export const listDirectoryInput = z.strictObject({
  path: z
    .string()
    .optional()
    .describe('Directory: relative to the workspace (default "" = the workspace root).'),
});

/** Every tool: its schema and the description a model reads. */
export const TOOL_SPECS = {
  exec_command: {
    schema: execCommandInput,
    description:
      "Run a shell command in the workspace. Returns as soon as it exits (output, exit code) or after yield_time_ms with a session_id if it is still running; then poll or send input with write_stdin, fetch any range with read_output, stop it with kill_session. stdout and stderr are interleaved in the order they were written.",
  },
  write_stdin: {
    schema: writeStdinInput,
    description:
      "Send chars to a running session's stdin (empty chars: just poll) and return the output written since your last exec_command/write_stdin on that session (never repeated, never lost), waiting up to yield_time_ms or until it exits.",
  },
  read_output: {
    schema: readOutputInput,
    description:
      "Read a session's retained output from any position (after_seq), for example the part an output budget left out. Does not wait and does not move the write_stdin position.",
  },
  kill_session: {
    schema: killSessionInput,
    description:
      "Stop a session (its whole process group) and return its remaining output and exit status.",
  },
  list_sessions: {
    schema: listSessionsInput,
    description: "List sessions (executions): id, state, exit code, command, last seq.",
  },
  bash: {
    schema: bashInput,
    description:
      "Run a command in a persistent bash shell: cd, exports and functions persist between calls. Output is stdout and stderr; the last line gives the exit status. A command still running at the timeout is killed and the shell restarted (in the same directory). restart: true starts a fresh shell.",
  },
  str_replace_based_edit_tool: {
    schema: editorInput,
    description:
      "View, create and edit files in the workspace. view: a file with line numbers (view_range [start, end]) or a directory listing. create: write file_text. str_replace: replace old_str, which must occur exactly once, with new_str. insert: insert insert_text after line insert_line (0 = top).",
  },
  read_file: {
    schema: readFileInput,
    description: "Read a file: UTF-8 text as is, anything else as base64 (the result says which).",
  },
  write_file: {
    schema: writeFileInput,
    description: "Create or replace a file (parents created); content is UTF-8 text or base64.",
  },
  list_directory: {
    schema: listDirectoryInput,
    description: "List a directory: name, type (file, dir, symlink, other), size.",
  },
} as const;

export type ToolName = keyof typeof TOOL_SPECS;
export type ToolInput<N extends ToolName> = z.infer<(typeof TOOL_SPECS)[N]["schema"]>;

export const TOOL_NAMES = Object.keys(TOOL_SPECS) as ToolName[];
