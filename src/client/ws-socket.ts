// The WebSocket the SDK's websocket transport (ws-transport.ts) runs on, as a
// small injectable factory, so the transport itself is the same code in Node
// and browsers:
// - a global WebSocket (browsers, Deno, Bun, Node 22+) is used when present:
//   it cannot send headers, so the token travels as `?token=` (the server
//   accepts it on upgrades); binary messages arrive as ArrayBuffers;
// - otherwise (Node 20) the `ws` package, loaded on first use from
//   ws-node.ts through a computed specifier, so bundlers and browsers never
//   see a Node-only import;
// - or the caller's own factory (`ComputerClientOptions.webSocket`).

import { ComputerError } from "../wire/errors.js";

/** One socket as the transport drives it. */
export interface WsLike {
  /** The subprotocol the server selected ("" when none). */
  readonly protocol: string;
  send(text: string): void;
  close(code?: number, reason?: string): void;
  /** Stop / restart reading the socket (TCP backpressure); only where the platform can. */
  pause?(): void;
  resume?(): void;
  /** Whether an idle socket may keep the process alive (Node); optional. */
  setIdle?(idle: boolean): void;
}

/** What the socket reports; `onError` comes before `onClose` when the cause is known. */
export interface WsHandlers {
  onOpen(): void;
  /** A message: text as a string or its UTF-8 bytes, binary as bytes. */
  onMessage(data: string | Uint8Array, binary: boolean): void;
  onError(error: ComputerError): void;
  onClose(): void;
}

/** Opens a socket to `url` offering `protocols`; `headers` (auth) where the platform can send them. */
export type WebSocketFactory = (
  url: string,
  protocols: string[],
  headers: Record<string, string>,
  handlers: WsHandlers,
) => WsLike;

/** The WHATWG WebSocket constructor shape (a browser's, undici's). */
type WhatwgWebSocketCtor = new (url: string, protocols?: string[]) => WebSocket;

/**
 * A factory over a WHATWG WebSocket class. Headers cannot be sent: a bearer
 * token among them moves into the query string.
 */
export function whatwgWebSocketFactory(Ctor: WhatwgWebSocketCtor): WebSocketFactory {
  return (url, protocols, headers, handlers) => {
    const u = new URL(url);
    const bearer = /^Bearer (.+)$/.exec(headers.authorization ?? "");
    if (bearer) u.searchParams.set("token", bearer[1]!);
    const ws = new Ctor(u.href, protocols);
    ws.binaryType = "arraybuffer";
    ws.onopen = () => handlers.onOpen();
    ws.onmessage = (ev: MessageEvent) => {
      const data = ev.data;
      if (typeof data === "string") handlers.onMessage(data, false);
      else handlers.onMessage(new Uint8Array(data as ArrayBuffer), true);
    };
    // A browser hides why an upgrade failed; onclose follows and the transport reconnects.
    ws.onerror = () => {};
    ws.onclose = () => handlers.onClose();
    return {
      get protocol() {
        return ws.protocol;
      },
      send: (text) => ws.send(text),
      close: (code, reason) => ws.close(code, reason),
    };
  };
}

let loaded: Promise<WebSocketFactory> | undefined;

/** The factory for this platform (see the file header). */
export function defaultWebSocketFactory(): Promise<WebSocketFactory> {
  const global = (globalThis as { WebSocket?: WhatwgWebSocketCtor }).WebSocket;
  if (global) return Promise.resolve(whatwgWebSocketFactory(global));
  if (!loaded) {
    // Computed, so that bundlers leave it alone: only Node without a global WebSocket gets here.
    const specifier = "./ws-node.js";
    loaded = (
      import(/* @vite-ignore */ /* webpackIgnore: true */ specifier) as Promise<{
        nodeWebSocketFactory: WebSocketFactory;
      }>
    ).then(
      (m) => m.nodeWebSocketFactory,
      (err) => {
        loaded = undefined;
        throw new ComputerError(
          "EUNSUPPORTED",
          "no WebSocket implementation: pass ComputerClientOptions.webSocket",
          { cause: err },
        );
      },
    );
  }
  return loaded;
}
