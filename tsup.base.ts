import type { Options } from "tsup";

/** Shared tsup options: every package ships ESM + .d.ts from src/index.ts. */
export const baseTsupConfig: Options = {
  entry: ["src/index.ts"],
  format: ["esm"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "node20",
  platform: "node",
};
