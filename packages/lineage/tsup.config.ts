import { defineConfig } from "tsup";
import { baseTsupConfig } from "../../tsup.base.ts";

// Two entries: the package, and `@factflow/lineage/pglite` (the optional embedded database).
export default defineConfig({ ...baseTsupConfig, entry: ["src/index.ts", "src/pglite.ts"] });
