import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runConformanceSuite } from "@factflow/infra-testkit";
import { afterAll, describe } from "vitest";
import { createEmbeddedProvider } from "../src/index.js";

// The embedded provider needs no service, so both modes always run.
describe("memory mode", () => {
  runConformanceSuite({
    name: "embedded",
    available: { ok: true },
    createProvider: () => createEmbeddedProvider({ mode: "memory" }),
    faults: {
      kind: "none",
      reason: "memory mode keeps nothing across a restart by design (capabilities.durable is false)",
    },
  });
});

describe("file mode", () => {
  // One data directory for every provider the suite builds, so a restarted one sees the same log.
  const dataDir = mkdtempSync(join(tmpdir(), "factflow-conformance-"));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
  runConformanceSuite({
    name: "embedded",
    available: { ok: true },
    createProvider: () => createEmbeddedProvider({ mode: "file", dataDir }),
    faults: { kind: "restart" },
  });
});
