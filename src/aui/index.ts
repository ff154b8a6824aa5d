// Public entry of `agent-computer/aui`: the A@UI protocol (docs/protocol.md §3).
// Protocol layer: types, validation, the SSE stream consumer.

export {
  type AAtUIConnection,
  type AAtUITransport,
  type ConnectionState,
  type ConnectOptions,
  connectAAtUI,
  type TransportError,
  type WebSocketCtor,
} from "./connect.js";
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
// Widget runtime (DOM) and the reconnecting transports.
export {
  type AAtUIComponent,
  type AAtUIError,
  type AAtUIErrorSource,
  type AAtUIInstance,
  type AAtUIRuntime,
  type AAtUIRuntimeOptions,
  type ComponentEmission,
  type CreateWidgetIdContext,
  createAAtUIRuntime,
  type DispatchMeta,
  type Emit,
  jsonProblem,
  relayWidgetId,
  WIDGET_READY,
  type WidgetReady,
} from "./runtime.js";
export type * from "./types.js";
export {
  type CommandValidation,
  isPlainObject,
  type UiEventValidation,
  validateCommand,
  validateUiEvent,
} from "./validate.js";
