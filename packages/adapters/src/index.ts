import type { AdapterDefinition } from "@factflow/protocols";
import { batchAdapter } from "./batch.js";
import { delayAdapter } from "./delay.js";
import { failAdapter } from "./fail.js";
import { filterAdapter } from "./filter.js";
import { jsonTransformAdapter } from "./json-transform.js";
import { logAdapter } from "./log.js";
import { passthroughAdapter } from "./passthrough.js";
import { splitAdapter } from "./split.js";
import { writeArtefactAdapter } from "./write-artefact.js";

export { batchAdapter } from "./batch.js";
export { defineAdapter, getPath } from "./define-adapter.js";
export { delayAdapter } from "./delay.js";
export { failAdapter } from "./fail.js";
export { filterAdapter } from "./filter.js";
export { jsonTransformAdapter } from "./json-transform.js";
export { logAdapter } from "./log.js";
export { passthroughAdapter } from "./passthrough.js";
export { splitAdapter } from "./split.js";
export { expandKey, writeArtefactAdapter } from "./write-artefact.js";

/** Every built-in adapter, to hand to `createEngine({ adapters })`. */
export const adapters: readonly AdapterDefinition[] = Object.freeze([
  passthroughAdapter,
  logAdapter,
  jsonTransformAdapter,
  splitAdapter,
  batchAdapter,
  writeArtefactAdapter,
  filterAdapter,
  delayAdapter,
  failAdapter,
]);
