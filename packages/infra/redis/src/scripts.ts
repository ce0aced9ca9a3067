import { createHash } from "node:crypto";
import type { Redis } from "ioredis";

/**
 * The Lua scripts behind every step that must be atomic in Redis. Each one runs as a unit, so a
 * retry copy and the acknowledgement of its original happen together or not at all, and a script
 * resent after a lost connection finds the original already settled and does nothing twice.
 *
 * Delayed entries live in a sorted set scored by due time (Redis `TIME`, so every process agrees),
 * as members `<nonce>\n<headers json>\n<body json>` (JSON text never holds a raw newline).
 */
export interface Script {
  readonly name: string;
  readonly lua: string;
  readonly sha: string;
}

const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function ms(n) return string.format('%.0f', n) end`;

/** True when `consumer` holds entry `id` of stream `key` as pending in `group`. */
const OWNED = `local function owned(key, group, id, consumer)
  local ok, p = pcall(redis.call, 'XPENDING', key, group, id, id, 1)
  return ok and #p > 0 and p[1][2] == consumer
end`;

function script(name: string, lua: string): Script {
  return { name, lua, sha: createHash("sha1").update(lua).digest("hex") };
}

/**
 * KEYS: subscription set. ARGV: lane key prefix, headers, body, delay ms, nonce.
 * Adds the message to the lane of every subscription of a topic (or schedules it there); returns
 * how many subscriptions got it.
 */
export const PUBLISH_TOPIC = script(
  "publish-topic",
  `${NOW}
local subs = redis.call('SMEMBERS', KEYS[1])
local delay = tonumber(ARGV[4])
for _, sub in ipairs(subs) do
  local lane = ARGV[1] .. sub
  if delay > 0 then
    redis.call('ZADD', lane .. ':delayed', ms(now + delay), ARGV[5] .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[3])
  else
    redis.call('XADD', lane, '*', 'b', ARGV[3], 'h', ARGV[2])
  end
end
return #subs`,
);

/** KEYS: delayed set. ARGV: headers, body, delay ms, nonce. Schedules one entry; returns the delay. */
export const SCHEDULE = script(
  "schedule",
  `${NOW}
redis.call('ZADD', KEYS[1], ms(now + tonumber(ARGV[3])), ARGV[4] .. '\\n' .. ARGV[1] .. '\\n' .. ARGV[2])
return tonumber(ARGV[3])`,
);

/**
 * KEYS: delayed set, stream. ARGV: most entries to move. Moves due entries into the stream; returns
 * { moved, ms until the next one is due or -1 }.
 */
export const PROMOTE = script(
  "promote",
  `${NOW}
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms(now), 'LIMIT', 0, tonumber(ARGV[1]))
for _, m in ipairs(due) do
  local a = string.find(m, '\\n', 1, true)
  local b = string.find(m, '\\n', a + 1, true)
  redis.call('XADD', KEYS[2], '*', 'b', string.sub(m, b + 1), 'h', string.sub(m, a + 1, b - 1))
  redis.call('ZREM', KEYS[1], m)
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local wait = -1
if #nxt > 0 then wait = math.max(0, tonumber(nxt[2]) - now) end
return {#due, wait}`,
);

/**
 * KEYS: stream, target (stream, delayed set or dead-letter stream). ARGV: group, consumer, entry id,
 * mode (ack | add | back | delay), headers, body, delay ms, nonce.
 * Settles one delivery if this consumer still holds it: first the copy (added to the target, or
 * scheduled; a hand-back copy, `back`, carries the field `r` so its next delivery is flagged
 * redelivered), then XACK + XDEL of the original. Returns 1 when settled now, 2 when the entry is
 * already settled and gone (a resend of this script after a lost reply), 0 when another consumer
 * holds it (reclaimed), -1 when the group is gone.
 */
export const SETTLE = script(
  "settle",
  `${NOW}
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if not ok then return -1 end
if #p == 0 then
  -- Not pending: settled already (typically this very script, resent after a lost reply) when the
  -- entry is gone; otherwise never delivered to this group again.
  if #redis.call('XRANGE', KEYS[1], ARGV[3], ARGV[3]) == 0 then return 2 end
  return 0
end
if p[1][2] ~= ARGV[2] then return 0 end
if ARGV[4] == 'add' then
  redis.call('XADD', KEYS[2], '*', 'b', ARGV[6], 'h', ARGV[5])
elseif ARGV[4] == 'back' then
  redis.call('XADD', KEYS[2], '*', 'b', ARGV[6], 'h', ARGV[5], 'r', '1')
elseif ARGV[4] == 'delay' then
  redis.call('ZADD', KEYS[2], ms(now + tonumber(ARGV[7])), ARGV[8] .. '\\n' .. ARGV[5] .. '\\n' .. ARGV[6])
end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
return 1`,
);

/**
 * KEYS: stream. ARGV: group, consumer, lowest id, highest id, entry ids... (see {@link settleAcksArgs}).
 * Acknowledges a batch of deliveries (those settled during one event-loop turn) with the same rule
 * as SETTLE's `ack` for each: XACK + XDEL only when this consumer still holds the entry (the held
 * ones in one XACK and one XDEL). Returns one code per id, as SETTLE does: 1 settled, 2 settled
 * before, 0 held by another consumer, -1 no group.
 *
 * Ownership is read with one XPENDING over the batch's id range filtered by this consumer (Redis
 * walks only this consumer's own pending list), not one XPENDING per id: an id in that reply is held
 * by this consumer. An id missing from it (held by another consumer, settled before, outside a wrong
 * range, or beyond the reply's COUNT when this consumer holds many more entries inside the range)
 * gets SETTLE's own per-id check, so the answer for every id is the one SETTLE would give whatever
 * the range says.
 */
export const SETTLE_ACKS = script(
  "settle-acks",
  `local group, me = ARGV[1], ARGV[2]
local mine = {}
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], group, ARGV[3], ARGV[4], 2 * (#ARGV - 4) + 64, me)
if ok then
  for i = 1, #p do mine[p[i][1]] = true end
end
local out = {}
local held = {}
for i = 5, #ARGV do
  local id = ARGV[i]
  if mine[id] then
    held[#held + 1] = id
    out[#out + 1] = 1
  else
    local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], group, id, id, 1)
    if not ok then
      out[#out + 1] = -1
    elseif #p == 0 then
      if #redis.call('XRANGE', KEYS[1], id, id) == 0 then out[#out + 1] = 2 else out[#out + 1] = 0 end
    elseif p[1][2] ~= me then
      out[#out + 1] = 0
    else
      held[#held + 1] = id
      out[#out + 1] = 1
    end
  end
end
if #held > 0 then
  redis.call('XACK', KEYS[1], group, unpack(held))
  redis.call('XDEL', KEYS[1], unpack(held))
end
return out`,
);

/** Whether stream entry id `a` (`<ms>-<seq>`, decimal) comes before `b`. */
export function streamIdBefore(a: string, b: string): boolean {
  const dashA = a.indexOf("-");
  const dashB = b.indexOf("-");
  // Without leading zeros, a shorter number is a smaller one.
  if (dashA !== dashB) return dashA < dashB;
  if (a.length === b.length) return a < b;
  const msA = a.slice(0, dashA);
  const msB = b.slice(0, dashB);
  return msA === msB ? a.length < b.length : msA < msB;
}

/**
 * SETTLE_ACKS's arguments for `ids`: the group, the consumer, the lowest and highest id (found here,
 * where comparing ids costs less than in Lua) and the ids.
 */
export function settleAcksArgs(group: string, consumer: string, ids: readonly string[]): string[] {
  let lo = ids[0] ?? "0-0";
  let hi = lo;
  for (let i = 1; i < ids.length; i++) {
    const id = ids[i] as string;
    if (streamIdBefore(id, lo)) lo = id;
    else if (streamIdBefore(hi, id)) hi = id;
  }
  return [group, consumer, lo, hi, ...ids];
}

/**
 * KEYS: stream, consumers set. ARGV: group, consumer, entry ids...
 * The heartbeat of a live consumer: refreshes its score in the consumers set and resets the idle
 * time of the entries it still holds (so no other consumer reclaims them); returns the ids it no
 * longer holds.
 */
export const TOUCH = script(
  "touch",
  `${NOW}
${OWNED}
redis.call('ZADD', KEYS[2], ms(now), ARGV[2])
local lost = {}
for i = 3, #ARGV do
  if owned(KEYS[1], ARGV[1], ARGV[i], ARGV[2]) then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  else
    table.insert(lost, ARGV[i])
  end
end
return lost`,
);

/**
 * KEYS: stream, consumers set, subscription set (or the stream again for a queue). ARGV: group,
 * consumer, escaped subscription name ('' for a queue).
 * Registers a consumer: the stream and its group (reading from the start, so messages published
 * before the first subscriber wait for it), the consumer, its heartbeat and, for a topic, the
 * subscription in the topic's set.
 */
export const JOIN = script(
  "join",
  `${NOW}
local ok, err = pcall(redis.call, 'XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
if not ok and not string.find(tostring(err), 'BUSYGROUP', 1, true) then return redis.error_reply(tostring(err)) end
redis.call('XGROUP', 'CREATECONSUMER', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ms(now), ARGV[2])
if ARGV[3] ~= '' then redis.call('SADD', KEYS[3], ARGV[3]) end
return 1`,
);

/**
 * KEYS: stream, consumers set. ARGV: group, consumer.
 * Unregisters a consumer; removes it from the group only when it holds no pending entry (removing
 * it would drop those entries from the group for good).
 */
export const LEAVE = script(
  "leave",
  `redis.call('ZREM', KEYS[2], ARGV[2])
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if ok and #p == 0 then pcall(redis.call, 'XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2]) end
return 1`,
);

/**
 * KEYS: stream, consumers set. ARGV: group, stale ms, own consumer.
 * Forgets consumers without a heartbeat for `stale` ms, and removes from the group those that hold
 * nothing (what they held is reclaimed with XAUTOCLAIM first). Returns how many were removed.
 */
export const REAP = script(
  "reap",
  `${NOW}
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms(now - tonumber(ARGV[2])))
local ok, list = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then return 0 end
local removed = 0
for _, c in ipairs(list) do
  local name, pending
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1] elseif c[i] == 'pending' then pending = c[i + 1] end
  end
  if name ~= ARGV[3] and pending == 0 and not redis.call('ZSCORE', KEYS[2], name) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    removed = removed + 1
  end
end
return removed`,
);

/**
 * KEYS: stream, delayed set, dead-letter stream, consumers set. ARGV: group, stale ms.
 * Returns { stream length, pending, delayed, dead letters, live consumers }.
 */
export const STATS = script(
  "stats",
  `${NOW}
local len = redis.call('XLEN', KEYS[1])
local pending = 0
local ok, s = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1])
if ok then pending = s[1] end
local live = redis.call('ZCOUNT', KEYS[4], ms(now - tonumber(ARGV[2])), '+inf')
return {len, pending, redis.call('ZCARD', KEYS[2]), redis.call('XLEN', KEYS[3]), live}`,
);

/**
 * KEYS: dead-letter stream, stream. ARGV: dead-letter entry id, headers, body.
 * Moves one dead letter back to its lane if it is still there (an emptied dead-letter stream is
 * deleted); returns 1 when moved, else 0.
 */
export const REDRIVE = script(
  "redrive",
  `if redis.call('XDEL', KEYS[1], ARGV[1]) == 1 then
  redis.call('XADD', KEYS[2], '*', 'b', ARGV[3], 'h', ARGV[2])
  if redis.call('XLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
  return 1
end
return 0`,
);

/**
 * KEYS: dead-letter stream. ARGV: dead-letter entry id.
 * Deletes one dead letter; an emptied dead-letter stream goes with it. Returns 1 when deleted.
 */
export const DISCARD = script(
  "discard",
  `local n = redis.call('XDEL', KEYS[1], ARGV[1])
if n == 1 and redis.call('XLEN', KEYS[1]) == 0 then redis.call('DEL', KEYS[1]) end
return n`,
);

/**
 * KEYS: stream, delayed set, dead-letter stream, consumers set, subscription set (or the stream).
 * ARGV: group, stale ms, ifEmpty (0|1), keep dead letters (0|1), escaped subscription ('' for a queue).
 * Deletes a lane unless live consumers are attached (or, with ifEmpty, messages wait or are in
 * flight). Returns { outcome, a, b }: consumers n | busy depth pending | unknown deadLetters |
 * deleted deadLettersKept.
 */
export const DELETE_LANE = script(
  "delete-lane",
  `${NOW}
local live = redis.call('ZCOUNT', KEYS[4], ms(now - tonumber(ARGV[2])), '+inf')
if live > 0 then return {'consumers', live, 0} end
local len = redis.call('XLEN', KEYS[1])
local pending = 0
local ok, s = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1])
if ok then pending = s[1] end
local depth = len - pending + redis.call('ZCARD', KEYS[2])
if ARGV[3] == '1' and (depth > 0 or pending > 0) then return {'busy', depth, pending} end
local known = redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[4])
if ARGV[5] ~= '' and redis.call('SISMEMBER', KEYS[5], ARGV[5]) == 1 then known = known + 1 end
local dead = redis.call('XLEN', KEYS[3])
if known == 0 then
  if dead > 0 and ARGV[4] == '0' then
    redis.call('DEL', KEYS[3])
    return {'deleted', 0, 0}
  end
  return {'unknown', dead, 0}
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
if ARGV[5] ~= '' then redis.call('SREM', KEYS[5], ARGV[5]) end
if ARGV[4] == '1' and dead > 0 then return {'deleted', dead, 0} end
redis.call('DEL', KEYS[3])
return {'deleted', 0, 0}`,
);

/**
 * Runs a script by its SHA, loading it on the first `NOSCRIPT` (after a Redis restart or on a new
 * server). Keys and arguments are strings.
 */
export async function runScript<T = unknown>(
  redis: Redis,
  s: Script,
  keys: readonly string[],
  args: readonly (string | number)[],
): Promise<T> {
  try {
    return (await redis.evalsha(s.sha, keys.length, ...keys, ...args)) as T;
  } catch (error) {
    if (!String((error as Error)?.message).startsWith("NOSCRIPT")) throw error;
    return (await redis.eval(s.lua, keys.length, ...keys, ...args)) as T;
  }
}

/**
 * KEYS: stream. ARGV: group. Deletes the entries the group has not delivered yet (after its
 * last-delivered id; every entry when no group exists), leaving pending ones with their consumers.
 * Returns how many were deleted, or -1 when the stream does not exist.
 */
export const PURGE = script(
  "purge",
  `if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local last = '0-0'
local ok, groups = pcall(redis.call, 'XINFO', 'GROUPS', KEYS[1])
if ok then
  for _, g in ipairs(groups) do
    local name, id
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then id = g[i + 1] end
    end
    if name == ARGV[1] then last = id end
  end
end
local purged = 0
while true do
  local entries = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', 500)
  if #entries == 0 then break end
  local ids = {}
  for i, e in ipairs(entries) do ids[i] = e[1] end
  purged = purged + redis.call('XDEL', KEYS[1], unpack(ids))
  last = ids[#ids]
end
return purged`,
);

/**
 * KEYS: stream. ARGV: group, own consumer, most entries to claim, consumer name prefixes...
 * Claims for this consumer, whatever their idle time, the pending entries of every consumer whose
 * name starts with one of the prefixes (the consumers of a server known to be dead), then removes
 * those that hold nothing more from the group. Returns the claimed entries as XCLAIM does (entries
 * deleted meanwhile are left out).
 */
export const CLAIM_DEAD = script(
  "claim-dead",
  `local ok, list = pcall(redis.call, 'XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if not ok then return {} end
local room = tonumber(ARGV[3])
local claimed = {}
for _, c in ipairs(list) do
  local name, pending
  for i = 1, #c, 2 do
    if c[i] == 'name' then name = c[i + 1] elseif c[i] == 'pending' then pending = c[i + 1] end
  end
  local dead = false
  for i = 4, #ARGV do
    if name ~= ARGV[2] and string.sub(name, 1, #ARGV[i]) == ARGV[i] then dead = true end
  end
  if dead then
    if pending > 0 and room > 0 then
      local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', room, name)
      local ids = {}
      for _, e in ipairs(p) do table.insert(ids, e[1]) end
      if #ids > 0 then
        local got = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ids))
        for _, entry in ipairs(got) do table.insert(claimed, entry) end
        room = room - #ids
        pending = pending - #ids
      end
    end
    if pending <= 0 then redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name) end
  end
end
return claimed`,
);

let nonceCounter = 0;
/** Makes each delayed-set member unique, so two identical copies scheduled at once are both kept. */
export function nonce(): string {
  nonceCounter = (nonceCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${process.pid.toString(36)}.${Date.now().toString(36)}.${nonceCounter.toString(36)}.${Math.random().toString(36).slice(2, 8)}`;
}
