// The shapes every agent tool shares: what a call gets (a signal, a progress
// callback) and what it answers. A result is text first, because that is what
// a model reads on every transport (MCP content, Anthropic tool_result, AI SDK
// tool output); `data` carries the same facts as fields for programs (MCP
// structuredContent). A tool error is a result with `isError`, never a throw:
// the model reads the text and can fix its call.

export interface ToolResult {
  text: string;
  isError: boolean;
  data?: Record<string, unknown>;
}

export interface ToolCallContext {
  /** Aborts a waiting call (the caller cancelled the request). */
  signal?: AbortSignal;
  /**
   * Called while a call waits: when output arrives (at most every few hundred
   * ms) and on a periodic tick. MCP turns it into notifications/progress, which
   * clients use to reset their request timeout.
   */
  onProgress?(message: string): void;
}

export function ok(text: string, data?: Record<string, unknown>): ToolResult {
  return data ? { text, isError: false, data } : { text, isError: false };
}

export function fail(text: string): ToolResult {
  return { text, isError: true };
}
