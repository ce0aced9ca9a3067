#!/usr/bin/env node
import { main } from "./cli.js";
import { guardAgainstDrain } from "./drain-guard.js";
import { processOutput } from "./output.js";
import { useDefaultPgliteTemplateDir } from "./pglite-template-dir.js";

// A new embedded database starts as a copy of this installation's template (`factflow prepare`).
useDefaultPgliteTemplateDir();
let finished = false;
// Never Node's silent exit code 13 when a command waits on something nothing will settle.
guardAgainstDrain(() => finished, processOutput.err);
const code = await main(process.argv.slice(2));
finished = true;
// Flush stdout before exiting: a piped stdout is written asynchronously.
process.stdout.write("", () => process.exit(code));
