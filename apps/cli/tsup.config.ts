import { defineConfig } from "tsup";
import { baseTsupConfig } from "../../tsup.base.ts";

// bin.ts is the `factflow` executable of the published package.
export default defineConfig({ ...baseTsupConfig, entry: ["src/index.ts", "src/bin.ts"] });
