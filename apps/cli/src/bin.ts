#!/usr/bin/env node
import { main } from "./cli.js";

const code = await main(process.argv.slice(2));
// Flush stdout before exiting: a piped stdout is written asynchronously.
process.stdout.write("", () => process.exit(code));
