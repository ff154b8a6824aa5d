// Public entry of `agent-computer/client`: the isomorphic HTTP SDK. Web
// standards only (fetch, web streams), so it runs in Node, browsers, Deno, Bun
// and Workers; it returns the same ExecHandle interface as the in-process
// Computer.

export type * from "../runtime/types.js";
export { ComputerError, hasCode } from "../wire/errors.js";
export type * from "../wire/types.js";
export {
  ComputerClient,
  type ComputerClientOptions,
  type FileEntry,
  type FilesApi,
  type RemoteEventsOptions,
  RemoteExecHandle,
  type ResumeOptions,
  type TruncationPolicy,
} from "./client.js";
export {
  type ChannelOption,
  type PublishResult,
  type ReceivedUiEvent,
  UiClient,
  type UiClientOptions,
  type UiEventsOptions,
} from "./ui.js";
