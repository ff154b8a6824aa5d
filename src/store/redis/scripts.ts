// The event log's Lua scripts and the one place that loads and calls them.
// Every mutation of the log is one script, so it is atomic and safe to retry:
// ioredis re-sends commands whose reply was lost on a reconnect, and each
// script either recognises the resend (append compares already-stored seqs,
// create carries a token) or is a no-op the second time. The KEYS/ARGV order
// of each script is written beside it and only LogScripts builds it.
//
// The scripts compute a few names from the prefix themselves (the running set
// of a node read from the record, notification channels); the segments come
// from keys.ts, interpolated into the text, so the key schema stays in one
// file. That is fine on one Redis primary, not on Redis Cluster.

import type { Redis } from "ioredis";
import { EVENT_OVERHEAD_BYTES, NON_EXECUTION_ID_PREFIX } from "../common.js";
import type { Arg, RawEntry } from "./codec.js";
import { NOTIFY_CHANNEL_SEGMENT, type RedisKeys, RUNNING_SET_SEGMENT } from "./keys.js";

// Lua condition: the record `idVar` is an execution's, so it belongs in its
// node's running set (what the cluster's liveness sweeps close as lost).
// Other records sharing the log (the A@UI journal) never enter it.
const luaIsExecution = (idVar: string) =>
  `string.sub(${idVar}, 1, 1) ~= '${NON_EXECUTION_ID_PREFIX}'`;

// Lua snippet shared by `append` and `lost`: finish the record at seq `last`.
// Expects locals: meta, stream, prefix, id, node, retention, now.
const LUA_FINISH = `
local function finish(state, code, signal, last)
  local f = {'state', state, 'exitCode', code, 'endedAt', now, 'last', last}
  if signal ~= '' then f[#f + 1] = 'signal'; f[#f + 1] = signal end
  redis.call('HSET', meta, unpack(f))
  redis.call('SREM', prefix .. '${RUNNING_SET_SEGMENT}' .. node, id)
  if retention >= 0 then
    redis.call('PEXPIRE', meta, retention)
    redis.call('PEXPIRE', stream, retention)
  end
end
local function stateFor(reason)
  if reason == 'killed' or reason == 'timeout' or reason == 'lost' or reason == 'oom' or reason == 'limit' then return reason end
  return 'exited'
end
`;

// KEYS: meta, stream. ARGV: prefix, id, cap, retention, now, then 5 per event:
// seq, type (o/e bytes, O/E text, x exit), value, signal, reason.
const LUA_APPEND = `
local meta, stream = KEYS[1], KEYS[2]
local prefix, id = ARGV[1], ARGV[2]
local cap, retention, now = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local h = redis.call('HMGET', meta, 'state', 'last', 'earliest', 'bytes', 'node')
if not h[1] then return redis.error_reply('ENOENT no such execution: ' .. id) end
local last, earliest, bytes, node = tonumber(h[2]), tonumber(h[3]), tonumber(h[4]), h[5]
local finished = h[1] ~= 'running'
${LUA_FINISH}
local n = (#ARGV - 5) / 5
-- Pass 1 validates the whole batch: a script's writes are not rolled back on error.
local expect = last + 1
for i = 0, n - 1 do
  local b = 6 + i * 5
  local seq = tonumber(ARGV[b])
  if seq <= last then
    if seq >= earliest then
      local e = redis.call('XRANGE', stream, seq .. '-0', seq .. '-0')
      if #e == 1 then
        local f = e[1][2]
        local m = {}
        for j = 1, #f, 2 do m[f[j]] = f[j + 1] end
        if m.t ~= ARGV[b + 1] or m.v ~= ARGV[b + 2] or (m.s or '') ~= ARGV[b + 3] or (m.r or '') ~= ARGV[b + 4] then
          return redis.error_reply('EINVAL append to ' .. id .. ': seq ' .. seq .. ' already holds different content')
        end
      end
    end
  elseif seq == expect then
    if finished then return redis.error_reply('EINVAL append to ' .. id .. ': events after exit') end
    if ARGV[b + 1] == 'x' then finished = true end
    expect = expect + 1
  else
    return redis.error_reply('EINVAL append to ' .. id .. ': expected seq ' .. expect .. ', got ' .. seq)
  end
end
if expect == last + 1 then return last end
-- Pass 2 writes.
local exitb = nil
for i = 0, n - 1 do
  local b = 6 + i * 5
  local seq = tonumber(ARGV[b])
  if seq > last then
    if ARGV[b + 1] == 'x' then
      redis.call('XADD', stream, seq .. '-0', 't', 'x', 'v', ARGV[b + 2], 's', ARGV[b + 3], 'r', ARGV[b + 4])
      bytes = bytes + ${EVENT_OVERHEAD_BYTES}
      exitb = b
    else
      redis.call('XADD', stream, seq .. '-0', 't', ARGV[b + 1], 'v', ARGV[b + 2])
      bytes = bytes + ${EVENT_OVERHEAD_BYTES} + #ARGV[b + 2]
    end
    last = seq
  end
end
-- Ring: drop the oldest events past the cap; the last event always stays.
if bytes > cap and earliest < last then
  while bytes > cap and earliest < last do
    local e = redis.call('XRANGE', stream, earliest .. '-0', '+', 'COUNT', 128)
    if #e == 0 then break end
    for _, entry in ipairs(e) do
      if bytes <= cap or earliest >= last then break end
      local f = entry[2]
      local size = ${EVENT_OVERHEAD_BYTES}
      if f[2] ~= 'x' then size = size + #f[4] end
      bytes = bytes - size
      earliest = tonumber(string.match(entry[1], '^(%d+)')) + 1
    end
  end
  redis.call('XTRIM', stream, 'MINID', earliest .. '-0')
end
redis.call('HSET', meta, 'last', last, 'earliest', earliest, 'bytes', bytes)
if exitb then
  finish(stateFor(ARGV[exitb + 4]), ARGV[exitb + 2], ARGV[exitb + 3], last)
  redis.call('PUBLISH', prefix .. '${NOTIFY_CHANNEL_SEGMENT}' .. id, 'x' .. last)
else
  redis.call('PUBLISH', prefix .. '${NOTIFY_CHANNEL_SEGMENT}' .. id, last)
end
return last
`;

// KEYS: meta, stream. ARGV: after, limit, maxBytes. Returns entries, or {'F'}
// when there is nothing after `after` and the execution is finished.
const LUA_READ = `
local h = redis.call('HMGET', KEYS[1], 'earliest', 'last', 'state')
if not h[1] then return redis.error_reply('ENOENT no such execution') end
local after, earliest, last = tonumber(ARGV[1]), tonumber(h[1]), tonumber(h[2])
if after + 1 < earliest then return redis.error_reply('ELOG_TRUNCATED ' .. earliest) end
if after >= last then
  -- Nothing new: say whether it is finished, so a follower's next waitFor
  -- needs no round trip of its own (see RedisEventLog.waitFor).
  if h[3] ~= 'running' then return {'F'} end
  return {}
end
local e = redis.call('XRANGE', KEYS[2], (after + 1) .. '-0', '+', 'COUNT', ARGV[2])
local maxb, total = tonumber(ARGV[3]), 0
for i = 1, #e do
  local f = e[i][2]
  if f[2] ~= 'x' then total = total + #f[4] end
  if total > maxb and i > 1 then
    local out = {}
    for j = 1, i - 1 do out[j] = e[j] end
    return out
  end
end
return e
`;

// KEYS: meta, stream, index, counter. ARGV: prefix, id, token, node, then field/value pairs.
// The token makes a re-sent create (reply lost on a reconnect) succeed instead of EEXEC_BUSY.
const LUA_CREATE = `
local h = redis.call('HMGET', KEYS[1], 'state', 'token')
if h[1] == 'running' then
  if h[2] == ARGV[3] then return 0 end
  return redis.error_reply('EEXEC_BUSY execution ' .. ARGV[2] .. ' is still running')
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'token', ARGV[3], 'state', 'running', 'last', 0, 'earliest', 1, 'bytes', 0, unpack(ARGV, 5))
redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[4]), ARGV[2])
if ${luaIsExecution("ARGV[2]")} then
  redis.call('SADD', ARGV[1] .. '${RUNNING_SET_SEGMENT}' .. ARGV[4], ARGV[2])
end
redis.call('PUBLISH', ARGV[1] .. '${NOTIFY_CHANNEL_SEGMENT}' .. ARGV[2], 'c')
return 1
`;

// KEYS: meta, stream. ARGV: prefix, id, retention, now, then field/value pairs
// and a list of fields to delete after a lone '--' marker.
const LUA_UPDATE = `
local meta, stream, prefix, id = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local retention, now = tonumber(ARGV[3]), ARGV[4]
local h = redis.call('HMGET', meta, 'state', 'node')
if not h[1] then return redis.error_reply('ENOENT no such execution: ' .. id) end
local set, del, i = {}, {}, 5
while i <= #ARGV and ARGV[i] ~= '--' do set[#set + 1] = ARGV[i]; i = i + 1 end
for j = i + 1, #ARGV do del[#del + 1] = ARGV[j] end
if #set > 0 then redis.call('HSET', meta, unpack(set)) end
if #del > 0 then redis.call('HDEL', meta, unpack(del)) end
local s = redis.call('HMGET', meta, 'state', 'node', 'endedAt')
if h[1] == 'running' and (s[1] ~= 'running' or s[2] ~= h[2]) then
  redis.call('SREM', prefix .. '${RUNNING_SET_SEGMENT}' .. h[2], id)
end
if s[1] == 'running' and (h[1] ~= 'running' or s[2] ~= h[2]) and ${luaIsExecution("id")} then
  redis.call('SADD', prefix .. '${RUNNING_SET_SEGMENT}' .. s[2], id)
end
if h[1] == 'running' and s[1] ~= 'running' then
  if not s[3] then redis.call('HSET', meta, 'endedAt', now) end
  if retention >= 0 then
    redis.call('PEXPIRE', meta, retention)
    redis.call('PEXPIRE', stream, retention)
  end
  redis.call('PUBLISH', prefix .. '${NOTIFY_CHANNEL_SEGMENT}' .. id, 'x')
end
return 1
`;

// KEYS: meta, stream, index. ARGV: prefix, id.
const LUA_DISPOSE = `
local node = redis.call('HGET', KEYS[1], 'node')
if node then redis.call('SREM', ARGV[1] .. '${RUNNING_SET_SEGMENT}' .. node, ARGV[2]) end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('PUBLISH', ARGV[1] .. '${NOTIFY_CHANNEL_SEGMENT}' .. ARGV[2], 'd')
return 1
`;

// KEYS: meta, stream. ARGV: prefix, id, expected node, retention, now, exit value.
// Closes a running execution of a dead node with exit reason "lost". Conditional
// on state and owner, so when several sweepers race exactly one writes the exit,
// and an owner that is in fact alive loses its next append (EINVAL) instead of
// writing after the exit.
const LUA_LOST = `
local meta, stream, prefix, id = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local retention, now = tonumber(ARGV[4]), ARGV[5]
local h = redis.call('HMGET', meta, 'state', 'last', 'node')
local node = ARGV[3]
if h[1] ~= 'running' or h[3] ~= node then
  redis.call('SREM', prefix .. '${RUNNING_SET_SEGMENT}' .. node, id)
  return 0
end
${LUA_FINISH}
local seq = tonumber(h[2]) + 1
redis.call('XADD', stream, seq .. '-0', 't', 'x', 'v', ARGV[6], 's', '', 'r', 'lost')
redis.call('HINCRBY', meta, 'bytes', ${EVENT_OVERHEAD_BYTES})
finish('lost', ARGV[6], '', seq)
redis.call('PUBLISH', prefix .. '${NOTIFY_CHANNEL_SEGMENT}' .. id, 'x' .. seq)
return seq
`;

// KEYS: meta, index. ARGV: id. Drop an id from the index once its record has
// expired; the existence check in the same step keeps a re-created id.
const LUA_PRUNE_INDEX =
  "if redis.call('EXISTS', KEYS[1]) == 0 then return redis.call('ZREM', KEYS[2], ARGV[1]) end return 0";

type ScriptFn = (...args: Arg[]) => Promise<unknown>;
interface Scripted {
  acAppend: ScriptFn;
  acAppendFinal: ScriptFn;
  acReadBuffer: ScriptFn;
  acCreate: ScriptFn;
  acUpdate: ScriptFn;
  acDispose: ScriptFn;
  acLost: ScriptFn;
}

/**
 * The scripts, defined on one connection (ioredis sends EVALSHA and falls back
 * to EVAL after a script cache flush), with typed calls that build KEYS and
 * ARGV. Errors come back as Redis errors ("CODE message"); the caller maps
 * them (connection.ts).
 */
export class LogScripts {
  private readonly fns: Scripted;

  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
  ) {
    redis.defineCommand("acAppend", { numberOfKeys: 2, lua: LUA_APPEND });
    // The same append, allowed past maxmemory (Redis 7 script flags): only for
    // the few bytes that finish an execution (see RedisEventLog.sendAppend).
    redis.defineCommand("acAppendFinal", {
      numberOfKeys: 2,
      lua: `#!lua flags=allow-oom\n${LUA_APPEND}`,
    });
    redis.defineCommand("acRead", { numberOfKeys: 2, lua: LUA_READ, readOnly: true });
    redis.defineCommand("acCreate", { numberOfKeys: 4, lua: LUA_CREATE });
    redis.defineCommand("acUpdate", { numberOfKeys: 2, lua: LUA_UPDATE });
    redis.defineCommand("acDispose", { numberOfKeys: 3, lua: LUA_DISPOSE });
    redis.defineCommand("acLost", { numberOfKeys: 2, lua: LUA_LOST });
    this.fns = redis as unknown as Scripted;
  }

  /** Start (or replace a finished) record; resolves also for a re-sent create with the same token. */
  create(id: string, token: string, node: string, fields: Arg[]): Promise<unknown> {
    const k = this.keys;
    return this.fns.acCreate(
      k.meta(id),
      k.stream(id),
      k.index,
      k.counter,
      k.prefix,
      id,
      token,
      node,
      ...fields,
    );
  }

  /**
   * Append events (codec.eventArgs); resolves with the last stored seq.
   * `overMemory`: even when Redis is over its maxmemory (Redis 7+).
   */
  append(
    id: string,
    cap: number,
    retention: number,
    now: number,
    events: Arg[],
    overMemory = false,
  ): Promise<unknown> {
    const k = this.keys;
    return this.fns[overMemory ? "acAppendFinal" : "acAppend"](
      k.meta(id),
      k.stream(id),
      k.prefix,
      id,
      cap,
      retention,
      now,
      ...events,
    );
  }

  /** Entries after `after`, or `[<Buffer "F">]` when there are none and the execution is finished. */
  read(id: string, after: number, limit: number, maxBytes: number): Promise<RawEntry[] | [Buffer]> {
    const k = this.keys;
    return this.fns.acReadBuffer(k.meta(id), k.stream(id), after, limit, maxBytes) as Promise<
      RawEntry[] | [Buffer]
    >;
  }

  update(id: string, retention: number, now: number, set: Arg[], del: Arg[]): Promise<unknown> {
    const k = this.keys;
    return this.fns.acUpdate(
      k.meta(id),
      k.stream(id),
      k.prefix,
      id,
      retention,
      now,
      ...set,
      "--",
      ...del,
    );
  }

  dispose(id: string): Promise<unknown> {
    const k = this.keys;
    return this.fns.acDispose(k.meta(id), k.stream(id), k.index, k.prefix, id);
  }

  /** Close `id` as lost if it still runs on `node`; resolves with the exit's seq, or 0. */
  lost(
    id: string,
    node: string,
    retention: number,
    now: number,
    exitValue: number,
  ): Promise<unknown> {
    const k = this.keys;
    return this.fns.acLost(k.meta(id), k.stream(id), k.prefix, id, node, retention, now, exitValue);
  }

  /** Remove expired ids from the index, in one pipeline. */
  async pruneIndex(ids: string[]): Promise<void> {
    const pipe = this.redis.pipeline();
    for (const id of ids) pipe.eval(LUA_PRUNE_INDEX, 2, this.keys.meta(id), this.keys.index, id);
    await pipe.exec();
  }
}
