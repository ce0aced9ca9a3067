import { describe, expect, it } from "vitest";
import { ConfigError, FactflowError, isFactflowError, PipelineError, ProviderError } from "../src/index.js";

describe("errors", () => {
  it("ProviderError carries provider, reason, code and retryability", () => {
    const cause = new Error("ECONNREFUSED");
    const error = new ProviderError("rabbitmq", "connection", "cannot reach amqp://127.0.0.1:5672", {
      cause,
    });
    expect(error).toBeInstanceOf(FactflowError);
    expect(error.name).toBe("ProviderError");
    expect(error.code).toBe("provider_error");
    expect(error.retryable).toBe(true);
    expect(error.cause).toBe(cause);
    expect(error.message).toBe("[factflow/rabbitmq] cannot reach amqp://127.0.0.1:5672");
  });

  it("a closed provider has its own code", () => {
    const error = new ProviderError("embedded", "closed", "used after close()");
    expect(error.code).toBe("provider_closed");
    expect(error.retryable).toBe(false);
  });

  it("ConfigError lists every issue with its path and line", () => {
    const error = new ConfigError("pipeline docs.yaml", [
      { path: "routes.parse.adapters[0].type", message: 'unknown adapter "md_split"', line: 12 },
      { path: "init.route", message: 'unknown route "nope"' },
    ]);
    expect(error.code).toBe("config_invalid");
    expect(error.issues).toHaveLength(2);
    expect(error.message).toContain("routes.parse.adapters[0].type (line 12): unknown adapter");
    expect(error.message).toContain("init.route: unknown route");
  });

  it("isFactflowError recognises every subclass", () => {
    expect(isFactflowError(new PipelineError("too_many_executions", "x"))).toBe(true);
    expect(isFactflowError(new Error("x"))).toBe(false);
  });
});
