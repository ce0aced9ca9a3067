import { FactflowError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import {
  describeConnectError,
  isConnectionLoss,
  isDatabaseUnavailable,
  translateConnectionError,
} from "../src/connection-errors.js";

/** An error as node-postgres or Node's socket layer raises it: a message, maybe a code. */
const raised = (message: string, code?: string) =>
  code === undefined ? new Error(message) : Object.assign(new Error(message), { code });

describe("connection error classification (node-postgres errors, no database)", () => {
  it.each([
    ["Connection terminated unexpectedly", undefined, "the server closed the connection"],
    ["Connection terminated", undefined, "the server closed the connection"],
    [
      "Client has encountered a connection error and is not queryable",
      undefined,
      "the server closed the connection",
    ],
    ["Client was closed and is not queryable", undefined, "the server closed the connection"],
    ["timeout expired", undefined, "timed out while connecting"],
    ["Connection terminated due to connection timeout", undefined, "timed out while connecting"],
    ["connect ECONNREFUSED 127.0.0.1:1", "ECONNREFUSED", "connection refused"],
    ["read ECONNRESET", "ECONNRESET", "the server closed the connection"],
    [
      "terminating connection due to administrator command",
      "57P01",
      "the server ended the session (shutdown or terminated)",
    ],
    ["the database system is starting up", "57P03", "the server is starting up or shutting down"],
    ["connection failure", "08006", "08006 connection failure"],
  ])("%s (code %s) is a lost connection: %s", (message, code, described) => {
    const error = raised(message, code);
    expect(isConnectionLoss(error)).toBe(true);
    expect(describeConnectError(error)).toContain(described);
    expect(translateConnectionError(error, "postgres://u:<redacted>@db:5432/x")).toMatchObject({
      name: "FactflowError",
      code: "lineage_error",
      retryable: true,
      cause: error,
      message: expect.stringContaining("postgres://u:<redacted>@db:5432/x"),
    });
    // What the server answers 503 (retry later) for: the translated error, and the raw one.
    expect(isDatabaseUnavailable(translateConnectionError(error, "x"))).toBe(true);
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it.each([
    ["duplicate key value violates unique constraint", "23505"],
    ['relation "nope" does not exist', "42P01"],
    ["Do not know how to serialize a BigInt", undefined],
    ["Connection terminated unexpectedly, but this is an adapter's own text", undefined],
  ])("%s (code %s) passes through unchanged", (message, code) => {
    const error = raised(message, code);
    expect(isConnectionLoss(error)).toBe(false);
    expect(translateConnectionError(error, "x")).toBe(error);
    expect(isDatabaseUnavailable(error)).toBe(false);
  });

  it("calls no other error database unavailability, whatever its cause", () => {
    const refused = raised("connect ECONNREFUSED 127.0.0.1:5672", "ECONNREFUSED");
    expect(
      isDatabaseUnavailable(new FactflowError("provider_error", "broker down", { cause: refused })),
    ).toBe(false);
    expect(isDatabaseUnavailable(new FactflowError("lineage_error", "the store is closed"))).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
  });

  it("names a missing database and failed authentication", () => {
    expect(describeConnectError(raised('database "x" does not exist', "3D000"))).toBe(
      "the database does not exist",
    );
    expect(describeConnectError(raised("password authentication failed", "28P01"))).toBe(
      "authentication failed",
    );
  });
});
