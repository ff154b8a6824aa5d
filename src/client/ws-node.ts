// The SDK's WebSocket in Node without a global one (Node 20): the `ws`
// package behind the WebSocketFactory shape (ws-socket.ts). Loaded only by
// defaultWebSocketFactory's dynamic import, never by the browser build.
// Node-only on purpose: it sends the bearer header (no token in the URL),
// hands messages over as the Buffers `ws` received (no copy, no UTF-8 decode
// of text), reports an upgrade's HTTP status as its error code, and can pause
// the socket, which lets the transport apply TCP backpressure.

import WebSocket from "ws";
import { ComputerError, toErrorCode } from "../wire/errors.js";
import type { WebSocketFactory } from "./ws-socket.js";

const CODE_BY_STATUS: Record<number, string> = {
  401: "EUNAUTHORIZED",
  403: "EFORBIDDEN",
  404: "ENOENT",
  503: "EUNAVAILABLE",
};

export const nodeWebSocketFactory: WebSocketFactory = (url, protocols, headers, handlers) => {
  const ws = new WebSocket(url, protocols, { headers, perMessageDeflate: false });
  ws.on("open", () => {
    (ws as unknown as { _socket?: { setNoDelay(v: boolean): void } })._socket?.setNoDelay(true);
    handlers.onOpen();
  });
  ws.on("message", (data: Buffer, isBinary: boolean) => handlers.onMessage(data, isBinary));
  ws.on("unexpected-response", (_req, res) => {
    const code = toErrorCode(CODE_BY_STATUS[res.statusCode ?? 0] ?? "ENETWORK");
    handlers.onError(
      new ComputerError(code, `WebSocket upgrade refused: HTTP ${res.statusCode}`, {
        status: res.statusCode,
      }),
    );
    res.resume();
    ws.terminate();
  });
  ws.on("error", (err) =>
    handlers.onError(new ComputerError("ENETWORK", `WebSocket: ${err.message}`, { cause: err })),
  );
  ws.on("close", () => handlers.onClose());
  const socket = () => (ws as unknown as { _socket?: { ref(): void; unref(): void } })._socket;
  return {
    get protocol() {
      return ws.protocol;
    },
    send: (text) => ws.send(text),
    close: (code, reason) => ws.close(code, reason),
    pause: () => ws.pause(),
    resume: () => ws.resume(),
    setIdle: (idle) => (idle ? socket()?.unref() : socket()?.ref()),
  };
};
