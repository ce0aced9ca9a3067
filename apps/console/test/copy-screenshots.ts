/**
 * Copies the screenshots the browser tests wrote (test-results/screenshots, numbered `NN-name.png`)
 * to docs/ui, where docs/ui.md shows them. Run through `pnpm --filter @factflow/console run
 * screenshots`, which runs the browser tests first.
 */
import { copyFileSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { SHOTS_DIR } from "./browser.ts";

const DOCS_DIR = resolve(import.meta.dirname, "../../../docs/ui");
const shots = readdirSync(SHOTS_DIR).filter((name) => /^\d\d-[\w-]+\.png$/.test(name));
if (shots.length === 0)
  throw new Error(`[console] no screenshots in ${SHOTS_DIR}: run the browser tests first`);
for (const name of shots.sort()) {
  copyFileSync(join(SHOTS_DIR, name), join(DOCS_DIR, name));
  console.log(`${name} → docs/ui/${name}`);
}
