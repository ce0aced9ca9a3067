import { ProviderError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { createLifecycle } from "../src/lifecycle.js";

function thrown(work: () => unknown): ProviderError {
  try {
    work();
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  }
  throw new Error("expected a ProviderError");
}

describe("lifecycle", () => {
  it("connects once for concurrent callers and retries after a failure", async () => {
    const life = createLifecycle("kit", "createKitProvider()");
    expect(() => life.assertOpen("publish")).toThrow(/publish called before connect\(\)/);
    let calls = 0;
    await expect(
      life.connect(async () => {
        calls++;
        throw new Error("refused");
      }),
    ).rejects.toThrow("refused");
    expect(life.state).toBe("new");
    const open = async () => {
      calls++;
      await new Promise((resolve) => setTimeout(resolve, 5));
    };
    await Promise.all([life.connect(open), life.connect(open), life.connect(open)]);
    await life.connect(open);
    expect(calls).toBe(2);
    expect(life.isOpen).toBe(true);
    expect(() => life.assertOpen("publish")).not.toThrow();
  });

  it("closes once, and every use after close is a provider_closed error", async () => {
    const life = createLifecycle("kit", "createKitProvider()");
    await life.connect(async () => {});
    let shutdowns = 0;
    const shutdown = async () => {
      shutdowns++;
    };
    const first = life.close(shutdown);
    expect(life.close(shutdown)).toBe(first);
    await first;
    await life.close(shutdown);
    expect(shutdowns).toBe(1);
    const error = thrown(() => life.assertOpen('publish to "/queue/a"'));
    expect(error.code).toBe("provider_closed");
    expect(error.reason).toBe("closed");
    expect(error.message).toContain("createKitProvider()");
    await expect(life.connect(async () => {})).rejects.toMatchObject({ code: "provider_closed" });
    const notConnected = createLifecycle("kit").notConnectedError("subscribe");
    expect(notConnected.code).toBe("provider_not_connected");
    expect(notConnected.retryable).toBe(false);
  });

  it("a close during connect waits for it and stays closed", async () => {
    const life = createLifecycle("kit");
    let finish: () => void = () => {};
    const connecting = life.connect(() => new Promise<void>((resolve) => (finish = resolve)));
    let shutDown = false;
    const closing = life.close(async () => {
      shutDown = true;
    });
    await Promise.resolve();
    expect(shutDown, "shutdown waits for the connect").toBe(false);
    finish();
    await connecting;
    await closing;
    expect(shutDown).toBe(true);
    expect(life.state).toBe("closed");
  });
});
