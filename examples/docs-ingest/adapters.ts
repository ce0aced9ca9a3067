/**
 * The adapters of the docs-ingest example, loaded through the pipeline's `adapter_modules`.
 */
import type { AdapterDefinition } from "@factflow/protocols";
import { batch, write } from "./src/batch.js";
import { discover } from "./src/discover.js";
import { enrich, flaky, split } from "./src/sections.js";

export const adapters: readonly AdapterDefinition[] = [discover, split, flaky, enrich, batch, write];
