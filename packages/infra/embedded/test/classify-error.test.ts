import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ProviderError } from "@factflow/protocols";
import { describe, expect, it } from "vitest";
import { classifyError, createEmbeddedProvider } from "../src/index.js";
import { tempDir } from "./helpers.js";

function fsError(code: string, message: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${message}`), { code, errno: -1, syscall: "open" });
}

describe("classifyError", () => {
  it("maps file-system errors of the log to provider errors with a reason and a hint", () => {
    const cases: [string, string, boolean][] = [
      ["EACCES", "authorization", false],
      ["EROFS", "authorization", false],
      ["ENOSPC", "rejected", false],
      ["ENOENT", "not-found", false],
      ["EMFILE", "unknown", true],
      ["EIO", "unknown", false],
    ];
    for (const [code, reason, retryable] of cases) {
      const error = classifyError(
        fsError(code, "permission denied, open '/data/queue.log'"),
        "appending to the queue log",
      );
      expect(error).toBeInstanceOf(ProviderError);
      expect(error.reason, code).toBe(reason);
      expect(error.retryable, code).toBe(retryable);
      expect(error.provider).toBe("embedded");
      expect(error.message).toMatch(/^\[factflow\/embedded\] appending to the queue log failed \(/);
      expect(error.cause).toBeInstanceOf(Error);
    }
  });

  it("passes provider errors through and wraps non-errors", () => {
    const original = new ProviderError("embedded", "closed", "closed");
    expect(classifyError(original, "x")).toBe(original);
    expect(classifyError("weird", "reading").reason).toBe("unknown");
  });

  it("reports a data directory that is a file as a not-found provider error on connect", async () => {
    const dir = await tempDir();
    try {
      await mkdir(dir.path, { recursive: true });
      const blocked = join(dir.path, "not-a-dir");
      await writeFile(blocked, "x");
      const provider = createEmbeddedProvider({ mode: "file", dataDir: join(blocked, "queue") });
      await expect(provider.connect()).rejects.toMatchObject({ name: "ProviderError", provider: "embedded" });
      await provider.close();
    } finally {
      await dir.remove();
    }
  });
});
