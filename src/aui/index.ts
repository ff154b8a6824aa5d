// Public entry of `agent-computer/aui`: the A@UI protocol (WIRE.md §3).
// Protocol layer: types, validation, the SSE stream consumer.
export {
  type AAtUIStreamAdapter,
  AAtUIStreamConsumer,
  type AAtUIStreamSource,
  type ConsumeResult,
  consumeAAtUIStream,
  type StreamDispatchMeta,
  type StreamErrorCode,
  type StreamErrorContext,
} from "./consume.js";
export type * from "./types.js";
export {
  type CommandValidation,
  isPlainObject,
  type UiEventValidation,
  validateCommand,
  validateUiEvent,
} from "./validate.js";
