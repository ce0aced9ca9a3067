import { readFileSync } from "node:fs";
import { expect, it } from "vitest";

const MARKER = "<!-- walkthrough-provider/provider.ts -->\n```ts\n";

it("docs/contributing/new-provider.md shows provider.ts as it is", () => {
  const doc = readFileSync(
    new URL("../../../../../docs/contributing/new-provider.md", import.meta.url),
    "utf8",
  );
  const start = doc.indexOf(MARKER);
  expect(start, "the guide marks the walkthrough provider's code").toBeGreaterThanOrEqual(0);
  const shown = doc.slice(start + MARKER.length, doc.indexOf("\n```\n", start + MARKER.length));
  const source = readFileSync(new URL("./provider.ts", import.meta.url), "utf8").trimEnd();
  expect(shown).toBe(source);
});
