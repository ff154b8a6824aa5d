// The A@UI channels of ONE server: created with the server and handed
// explicitly to the routes and the dashboard (no module-level state, so two
// servers in one process never share channels). It names, creates, lists and
// closes channels and holds the limits every channel and transport uses.
// With a RelayStore (persist.ts: the server's SQLite or Redis log) the
// channels survive a restart: `ready` resolves once the stored ones are
// rebuilt, and the routes wait for it before touching a channel.

import { ComputerError } from "../../wire/errors.js";
import {
  type ChannelLimits,
  DEFAULT_CHANNEL_LIMITS,
  type Published,
  UiChannel,
} from "./channel.js";
import type { RelayStore } from "./persist.js";

export interface RelayLimits extends Partial<ChannelLimits> {
  /** Channels (default 1,000). */
  maxChannels?: number;
  /** Bytes buffered for one subscriber before it is cut (default 8 MiB). */
  maxSubscriberBuffer?: number;
  /** Longest long-poll wait (default 30 s). */
  maxWaitMs?: number;
  /** SSE heartbeat interval (default 15 s). */
  heartbeatMs?: number;
}

export const DEFAULT_RELAY_LIMITS: Required<RelayLimits> = {
  ...DEFAULT_CHANNEL_LIMITS,
  maxChannels: 1000,
  maxSubscriberBuffer: 8 * 1024 * 1024,
  maxWaitMs: 30_000,
  heartbeatMs: 15_000,
};

const CHANNEL_RE = /^[A-Za-z0-9._~-]{1,128}$/;

/** A channel as `GET /v1/ui` lists it (`cursor` is the API's name for its last seq). */
export interface ChannelSummary {
  name: string;
  cursor: number;
  subscribers: number;
  events: number;
}

export class UiRelay {
  readonly limits: Required<RelayLimits>;
  private readonly channels = new Map<string, UiChannel>();
  /** Resolves once the stored channels are rebuilt (at once without a store). */
  readonly ready: Promise<void>;

  constructor(
    limits: RelayLimits = {},
    private readonly store?: RelayStore,
  ) {
    const set = Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== undefined));
    this.limits = { ...DEFAULT_RELAY_LIMITS, ...set };
    this.ready = store
      ? store.load(this.limits).then(
          (stored) => {
            // A channel used in-process before the load finished (the dashboard) wins.
            for (const [name, ch] of stored) {
              if (this.channels.has(name)) continue;
              this.channels.set(name, ch);
              store.attach(ch);
            }
          },
          () => {},
        )
      : Promise.resolve();
  }

  /** The channel by name, created on first use (a closed one is replaced by a fresh one). */
  channel(name: string): UiChannel {
    if (!CHANNEL_RE.test(name))
      throw new ComputerError(
        "EINVAL",
        "channel names are 1-128 characters of A-Z a-z 0-9 . _ ~ -",
      );
    let ch = this.channels.get(name);
    if (!ch || ch.closed) {
      if (!ch && this.channels.size >= this.limits.maxChannels)
        throw new ComputerError("ELIMIT", "too many UI channels");
      ch = new UiChannel(name, this.limits);
      this.channels.set(name, ch);
      this.store?.attach(ch);
    }
    return ch;
  }

  publish(channel: string, command: unknown): Published {
    return this.channel(channel).publish(command);
  }

  /** Closes a channel (subscribers get [DONE]) and forgets it. */
  deleteChannel(name: string): void {
    const ch = this.channels.get(name);
    if (!ch) return;
    ch.close();
    this.channels.delete(name);
    this.store?.remove(name);
  }

  /** Waits until everything journaled is in the log (call before the log closes). */
  async flush(): Promise<void> {
    await this.ready;
    await this.store?.flush();
  }

  list(): ChannelSummary[] {
    return [...this.channels.values()].map((c) => ({
      name: c.name,
      cursor: c.lastSeq,
      subscribers: c.subscriberCount,
      events: c.lastEventSeq,
    }));
  }

  /** Server shutdown: cut every page's connection (no [DONE]: the page should come back). */
  close(): void {
    for (const ch of this.channels.values()) ch.close("cut");
    this.channels.clear();
  }
}
