import { errorText, isFactflowError, ProviderError } from "@factflow/protocols";
import { type NativeErrorMeaning, networkErrorCode } from "@factflow/provider-kit";
import { redactSecrets } from "./config.js";

/** Error prefixes of Redis replies and what they mean for a caller. */
const REPLY_PREFIXES: readonly (NativeErrorMeaning & { prefix: string })[] = [
  {
    prefix: "NOAUTH",
    reason: "authentication",
    hint: "Redis requires a password: put it in the URL, redis://:password@host:6379",
  },
  {
    prefix: "WRONGPASS",
    reason: "authentication",
    hint: "the user name or password in the Redis URL is wrong",
  },
  {
    prefix: "NOPERM",
    reason: "authorization",
    hint: "the Redis ACL user lacks a command or key permission this provider needs (stream, sorted set, set, EVALSHA)",
  },
  {
    prefix: "OOM",
    reason: "rejected",
    hint: "Redis reached maxmemory and refused the write; raise maxmemory or drain queues",
  },
  {
    prefix: "NOGROUP",
    reason: "not-found",
    hint: "the stream or its consumer group no longer exists (it was deleted)",
  },
  {
    prefix: "READONLY",
    reason: "connection",
    hint: "the server is a read-only replica; point the URL at the primary",
  },
  {
    prefix: "LOADING",
    reason: "connection",
    hint: "Redis is loading its dataset after a restart; it will answer shortly",
  },
  { prefix: "MASTERDOWN", reason: "connection", hint: "the replica lost its primary" },
  { prefix: "TRYAGAIN", reason: "connection", hint: "the cluster is resharding; try again" },
  { prefix: "BUSY", reason: "connection", hint: "Redis is running a long script" },
  { prefix: "NOSCRIPT", reason: "unknown", hint: "a Lua script was not cached (the client reloads it)" },
  {
    prefix: "ERR unknown command",
    reason: "unknown",
    hint: "this Redis is too old: Redis 6.2 or newer (7 recommended) is needed for XAUTOCLAIM",
  },
];

function classify(error: unknown, text: string): NativeErrorMeaning {
  if (/Command timed out/i.test(text)) {
    return {
      reason: "timeout",
      hint: "Redis did not answer in time (commandTimeoutMs); check that it is reachable and not overloaded",
    };
  }
  const name = (error as { name?: unknown } | null)?.name;
  if (name === "ReplyError" || name === "ReplyErrorWithNoReconnect") {
    for (const entry of REPLY_PREFIXES)
      if (text.startsWith(entry.prefix) || text.includes(` ${entry.prefix}`)) return entry;
    return { reason: "unknown", hint: "Redis refused the command" };
  }
  if (
    networkErrorCode(error, text) !== undefined ||
    name === "MaxRetriesPerRequestError" ||
    /Connection is closed|Stream isn't writeable|connect ETIMEDOUT|Reached the max retries/i.test(text)
  ) {
    return {
      reason: "connection",
      hint: "Redis could not be reached; check FACTFLOW_REDIS_URL and that the server runs",
    };
  }
  return { reason: "unknown", hint: "unexpected Redis client error" };
}

/**
 * Wraps an ioredis error (or anything thrown) in a `ProviderError` saying what failed and how to fix
 * it, with the password of `url` removed. A `FactflowError` passes through unchanged.
 */
export function classifyRedisError(error: unknown, operation: string, url?: string): Error {
  if (isFactflowError(error)) return error;
  const raw = errorText(error);
  const text = url === undefined ? raw : redactSecrets(raw, url);
  const { reason, hint } = classify(error, text);
  return new ProviderError("redis", reason, `${operation} failed: ${text} (${hint})`, { cause: error });
}
