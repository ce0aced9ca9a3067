#!/usr/bin/env node
import { main } from "./cli.js";
import { useDefaultPgliteTemplateDir } from "./pglite-template-dir.js";

// A new embedded database starts as a copy of this installation's template (`factflow prepare`).
useDefaultPgliteTemplateDir();
const code = await main(process.argv.slice(2));
// Flush stdout before exiting: a piped stdout is written asynchronously.
process.stdout.write("", () => process.exit(code));
