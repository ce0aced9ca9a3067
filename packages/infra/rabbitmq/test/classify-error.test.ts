import { ProviderError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { amqpReplyCode, classifyAmqpError } from "../src/index.js";

/**
 * Errors as amqplib 2.3 raised them against RabbitMQ 3.10 on this machine (name, message and the
 * fields it sets), rebuilt without a broker.
 */
function recorded(fields: {
  name?: string;
  message: string;
  code?: string | number;
  classId?: number;
  methodId?: number;
  errno?: number;
  syscall?: string;
}): Error {
  const error = new Error(fields.message);
  if (fields.name !== undefined) Object.defineProperty(error, "name", { value: fields.name });
  for (const key of ["code", "classId", "methodId", "errno", "syscall"] as const) {
    if (fields[key] !== undefined) Object.assign(error, { [key]: fields[key] });
  }
  return error;
}

const CASES: {
  label: string;
  error: Error;
  reason: ProviderError["reason"];
  retryable: boolean;
  mentions: string;
}[] = [
  {
    label: "ECONNREFUSED (nothing listening)",
    error: recorded({
      message: "connect ECONNREFUSED 127.0.0.1:5673",
      code: "ECONNREFUSED",
      errno: -111,
      syscall: "connect",
    }),
    reason: "connection",
    retryable: true,
    mentions: "unreachable",
  },
  {
    label: "ENOTFOUND (bad host name)",
    error: recorded({
      message: "getaddrinfo ENOTFOUND nonexistent.invalid",
      code: "ENOTFOUND",
      errno: -3008,
      syscall: "getaddrinfo",
    }),
    reason: "connection",
    retryable: true,
    mentions: "check the URL",
  },
  {
    label: "amqplib's connect timeout (no code, only text)",
    error: recorded({ message: "connect ETIMEDOUT" }),
    reason: "connection",
    retryable: true,
    mentions: "unreachable",
  },
  {
    label: "403 ACCESS_REFUSED at login (wrong password)",
    error: recorded({
      message:
        'Handshake terminated by server: 403 (ACCESS-REFUSED) with message "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile."',
    }),
    reason: "authentication",
    retryable: false,
    mentions: "credentials",
  },
  {
    label: "unknown vhost",
    error: recorded({ message: "Expected ConnectionOpenOk; got <ConnectionClose channel:0>" }),
    reason: "authorization",
    retryable: false,
    mentions: "virtual host",
  },
  {
    label: "403 ACCESS_REFUSED on a reserved queue name",
    error: recorded({
      message:
        "Operation failed: QueueDeclare; 403 (ACCESS-REFUSED) with message \"ACCESS_REFUSED - queue name 'amq.foo' contains reserved prefix 'amq.*'\"",
      code: 403,
      classId: 50,
      methodId: 10,
    }),
    reason: "authorization",
    retryable: false,
    mentions: "reserved",
  },
  {
    label: "404 NOT_FOUND on a passive declare",
    error: recorded({
      message:
        "Operation failed: QueueDeclare; 404 (NOT-FOUND) with message \"NOT_FOUND - no queue 'does-not-exist-xyz' in vhost '/'\"",
      code: 404,
      classId: 50,
      methodId: 10,
    }),
    reason: "not-found",
    retryable: false,
    mentions: "does not exist",
  },
  {
    label: "404 NOT_FOUND closing the channel on publish to a missing exchange",
    error: recorded({
      message:
        "Channel closed by server: 404 (NOT-FOUND) with message \"NOT_FOUND - no exchange 'no-such-exchange' in vhost '/'\"",
      code: 404,
      classId: 60,
      methodId: 40,
    }),
    reason: "not-found",
    retryable: false,
    mentions: "declare it first",
  },
  {
    label: "406 PRECONDITION_FAILED on a re-declare with other arguments",
    error: recorded({
      message:
        "Operation failed: QueueDeclare; 406 (PRECONDITION-FAILED) with message \"PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'rec-test-q' in vhost '/': received 'true' but current is 'false'\"",
      code: 406,
      classId: 50,
      methodId: 10,
    }),
    reason: "rejected",
    retryable: false,
    mentions: "different arguments",
  },
  {
    label: "406 PRECONDITION_FAILED for an unknown delivery tag (ack on a stale channel)",
    error: recorded({
      message:
        'Channel closed by server: 406 (PRECONDITION-FAILED) with message "PRECONDITION_FAILED - unknown delivery tag 999"',
      code: 406,
      classId: 60,
      methodId: 80,
    }),
    reason: "rejected",
    retryable: false,
    mentions: "delivery tag",
  },
  {
    label: "320 CONNECTION_FORCED (broker shutdown or operator)",
    error: recorded({
      message:
        "Connection closed: 320 (CONNECTION-FORCED) with message \"CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'\"",
      code: 320,
    }),
    reason: "connection",
    retryable: true,
    mentions: "re-established",
  },
  {
    label: "confirm callback after the channel closed",
    error: recorded({ message: "channel closed" }),
    reason: "closed",
    retryable: true,
    mentions: "reconnected",
  },
  {
    label: "operation on a closed channel",
    error: recorded({ name: "IllegalOperationError", message: "Channel closed" }),
    reason: "closed",
    retryable: true,
    mentions: "channel closed",
  },
  {
    label: "RPC cut off by a connection loss",
    error: recorded({ message: "Channel ended, no reply will be forthcoming" }),
    reason: "closed",
    retryable: true,
    mentions: "channel closed before",
  },
  {
    label: "connection closed by the client",
    error: recorded({ name: "IllegalOperationError", message: "Connection closed (by client)" }),
    reason: "connection",
    retryable: true,
    mentions: "dropped",
  },
  {
    label: "missed heartbeats",
    error: recorded({ message: "Heartbeat timeout" }),
    reason: "connection",
    retryable: true,
    mentions: "heartbeats",
  },
  {
    label: "socket ended",
    error: recorded({ message: "Unexpected close" }),
    reason: "connection",
    retryable: true,
    mentions: "dropped",
  },
  {
    label: "headers table too large to encode",
    error: Object.assign(new RangeError("Encoded headers table exceeds the 65536 byte encoding buffer"), {}),
    reason: "invalid-input",
    retryable: false,
    mentions: "too large",
  },
];

describe("classifyAmqpError", () => {
  for (const c of CASES) {
    it(`classifies ${c.label}`, () => {
      const error = classifyAmqpError(c.error, 'publish to "/queue/a"');
      expect(error).toBeInstanceOf(ProviderError);
      expect(error.provider).toBe("rabbitmq");
      expect(error.reason).toBe(c.reason);
      expect(error.retryable).toBe(c.retryable);
      expect(error.cause).toBe(c.error);
      expect(error.message.startsWith('[factflow/rabbitmq] publish to "/queue/a" failed:')).toBe(true);
      expect(error.message).toContain(c.mentions);
      expect(error.code).toBe("provider_error");
    });
  }

  it("passes a ProviderError through unchanged (e.g. the provider's own confirm timeout)", () => {
    const original = new ProviderError(
      "rabbitmq",
      "timeout",
      'publish to "/queue/a" timed out after 10000 ms waiting for the publisher confirm',
    );
    expect(classifyAmqpError(original, "publish")).toBe(original);
    expect(original.retryable).toBe(true);
  });

  it("classifies a broker nack of a publish as rejected and retryable", () => {
    // ConfirmChannel callbacks receive this on basic.nack.
    const error = classifyAmqpError(recorded({ message: "message nacked" }), "publish");
    expect(error.reason).toBe("rejected");
    expect(error.retryable).toBe(true);
  });

  it("falls back to unknown for anything unrecognised, and handles non-errors", () => {
    expect(classifyAmqpError(new Error("something odd"), "x").reason).toBe("unknown");
    expect(classifyAmqpError("a string", "x").reason).toBe("unknown");
    expect(classifyAmqpError({ weird: true }, "x").message).toContain("weird");
  });

  it("redacts the URL password from the message", () => {
    const url = "amqp://guest:Sup3rSecret@10.0.0.1:5672";
    const error = classifyAmqpError(new Error(`could not reach ${url} with Sup3rSecret`), "connect", url);
    expect(error.message).not.toContain("Sup3rSecret");
    expect(error.message).toContain("<redacted>");
  });

  it("reads reply codes from the field or the text", () => {
    expect(amqpReplyCode(recorded({ message: "x", code: 406 }))).toBe(406);
    expect(
      amqpReplyCode(
        recorded({ message: "Handshake terminated by server: 403 (ACCESS-REFUSED) with message" }),
      ),
    ).toBe(403);
    expect(
      amqpReplyCode(recorded({ message: "connect ECONNREFUSED", code: "ECONNREFUSED" })),
    ).toBeUndefined();
  });
});
