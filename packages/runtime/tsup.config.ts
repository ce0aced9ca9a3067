import { defineConfig } from "tsup";
import { baseTsupConfig } from "../../tsup.base.ts";

export default defineConfig({ ...baseTsupConfig });
