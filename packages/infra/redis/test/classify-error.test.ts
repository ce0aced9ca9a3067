import { ProviderError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { classifyRedisError } from "../src/index.js";

/** Errors as ioredis produces them (recorded shapes: name, message, code). */
function replyError(message: string): Error {
  const error = new Error(message);
  error.name = "ReplyError";
  return error;
}

function networkError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe("classifyRedisError", () => {
  it.each([
    [replyError("NOAUTH Authentication required."), "authentication", false],
    [replyError("WRONGPASS invalid username-password pair or user is disabled."), "authentication", false],
    [replyError("NOPERM this user has no permissions to run the 'xadd' command"), "authorization", false],
    [replyError("OOM command not allowed when used memory > 'maxmemory'."), "rejected", false],
    [replyError("NOGROUP No such key 'x' or consumer group 'factflow'"), "not-found", false],
    [replyError("READONLY You can't write against a read only replica."), "connection", true],
    [replyError("LOADING Redis is loading the dataset in memory"), "connection", true],
    [networkError("ECONNREFUSED", "connect ECONNREFUSED 127.0.0.1:6379"), "connection", true],
    [new Error("Connection is closed."), "connection", true],
    [new Error("Command timed out"), "timeout", true],
    [replyError("ERR something else"), "unknown", false],
  ])("%s → %s", (error, reason, retryable) => {
    const classified = classifyRedisError(error, 'publish to "/queue/a"');
    expect(classified).toBeInstanceOf(ProviderError);
    expect((classified as ProviderError).reason).toBe(reason);
    expect((classified as ProviderError).retryable).toBe(retryable);
    expect(classified.message).toContain('publish to "/queue/a" failed');
    expect((classified as ProviderError).cause).toBe(error);
  });

  it("removes the password from the message", () => {
    const error = networkError("ENOTFOUND", "getaddrinfo ENOTFOUND redis://:hunter22@nowhere:6379");
    const classified = classifyRedisError(error, "connect", "redis://:hunter22@nowhere:6379");
    expect(classified.message).not.toContain("hunter22");
  });

  it("passes a FactflowError through", () => {
    const original = new ProviderError("redis", "invalid-input", "bad");
    expect(classifyRedisError(original, "x")).toBe(original);
  });
});
