import { ProviderError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { artemisCode, classifyArtemisError } from "../src/index.js";

/**
 * Native errors recorded from Artemis 2.40.0 (scripts/services/artemis.sh) through @stomp/stompjs 7.5
 * and @stomp/tcp-wrapper 1.0.1. Frames are kept as the client hands them over (command, headers, body).
 */
const recorded = {
  /** ACK naming a delivery the connection never held (e.g. sent on a new connection after a reconnect). */
  ackUnknown: {
    command: "ERROR",
    headers: { message: "AMQ339025 failed to ack because no message with id 99,12345" },
    body: "",
  },
  /** ACK of a delivery whose consumer was closed and replaced on the same connection. */
  ackStaleConsumer: {
    command: "ERROR",
    headers: { message: "AMQ339018 Error acknowledging message 235,239" },
    body: "",
  },
  /** SEND with a receipt to `x::` (an empty FQQN queue part). */
  invalidQueueName: {
    command: "ERROR",
    headers: {
      "content-length": "31",
      "receipt-id": "r1",
      "content-type": "text/plain",
      message: "AMQ229216 Invalid queue name",
    },
    body: "AMQ229216: Invalid queue name: ",
  },
  /** SUBSCRIBE with `selector:(((`. */
  invalidSelector: {
    command: "ERROR",
    headers: { message: 'Invalid selector "((("', "content-type": "text/plain", "content-length": "3" },
    body: "(((",
  },
  /** What the TCP wrapper's onerror hands over when nothing listens on the port. */
  refused: {
    type: "Error",
    error: 100,
    message: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), {
      code: "ECONNREFUSED",
      errno: -111,
      syscall: "connect",
    }),
  },
  /** stompjs' own error when publishing while disconnected. */
  noConnection: new TypeError("There is no underlying STOMP connection"),
} as const;

describe("classifyArtemisError", () => {
  it("maps a stale or unknown ACK to rejected, naming the reissued delivery", () => {
    for (const frame of [recorded.ackUnknown, recorded.ackStaleConsumer]) {
      const error = classifyArtemisError(frame, "ack");
      expect(error).toBeInstanceOf(ProviderError);
      expect(error.reason).toBe("rejected");
      expect(error.retryable).toBe(false);
      expect(error.message).toMatch(/reissued/);
      expect(error.cause).toBe(frame);
    }
  });

  it("maps invalid names and selectors to invalid-input", () => {
    expect(classifyArtemisError(recorded.invalidQueueName, 'publish to "x"').reason).toBe("invalid-input");
    const selector = classifyArtemisError(recorded.invalidSelector, "subscribe");
    expect(selector.reason).toBe("invalid-input");
    expect(selector.message).toContain("selector");
  });

  it("maps a refused connection to a retryable connection error that says how to start the broker", () => {
    const error = classifyArtemisError(recorded.refused, "connect");
    expect(error.reason).toBe("connection");
    expect(error.retryable).toBe(true);
    expect(error.message).toContain("ECONNREFUSED");
    expect(error.message).toContain("scripts/services/artemis.sh start");
  });

  it("maps publishing without a connection to a retryable connection error", () => {
    const error = classifyArtemisError(recorded.noConnection, "publish");
    expect(error.reason).toBe("connection");
    expect(error.retryable).toBe(true);
  });

  it("maps authentication and authorization codes", () => {
    // Not recorded: the local broker allows anonymous logins. Texts follow Artemis' message catalogue.
    const auth = {
      command: "ERROR",
      headers: { message: "AMQ229031: Unable to validate user from /127.0.0.1:50000. Username: bob" },
    };
    const perm = {
      command: "ERROR",
      headers: { message: "AMQ229032: User: bob does not have permission='SEND' on address orders" },
    };
    expect(classifyArtemisError(auth, "connect").reason).toBe("authentication");
    expect(classifyArtemisError(perm, "publish").reason).toBe("authorization");
  });

  it("keeps unknown ERROR frames as unknown and passes ProviderErrors through", () => {
    const unknown = classifyArtemisError({ command: "ERROR", headers: { message: "something odd" } }, "x");
    expect(unknown.reason).toBe("unknown");
    expect(unknown.message).toContain("something odd");
    const original = new ProviderError("artemis", "timeout", "no receipt");
    expect(classifyArtemisError(original, "x")).toBe(original);
  });

  it("reads Artemis codes", () => {
    expect(artemisCode("AMQ339025 failed to ack")).toBe("AMQ339025");
    expect(artemisCode("no code here")).toBeUndefined();
  });
});
