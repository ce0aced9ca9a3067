import { parseArgs } from "node:util";
import { ConfigError } from "@factflow/protocols";
import { ApiError } from "./api-client.js";
import { type CliContext, type Flags, UsageError } from "./context.js";
import { type Output, processOutput } from "./output.js";

export const USAGE = `factflow — run pipelines, inspect executions, lineage and dead letters

Usage:
  factflow run <pipeline.yaml> [--input JSON|@file] [--json]   run one execution here and print a summary
        [--stall-after S] [--stall-timeout S]                  say what it waits for after S s without progress
                                                                (default 30, 0 never); give up after S s (exit 3)
  factflow serve [--host H] [--port P] [--insecure]             run the HTTP API (beyond loopback it needs
                                                                FACTFLOW_API_TOKEN, or --insecure)
  factflow config list | show NAME | validate FILE | run NAME [--input JSON] [--wait]
  factflow executions list [--status S] [--config C] | show ID | watch ID | cancel ID | resume ID
  factflow executions prune --older-than-days N                 delete executions finished > N days ago, with lineage
  factflow lineage EXECUTION [--message ID] [--route R] [--status S] [--kind message|adapter]
  factflow replay EXECUTION --from ROUTE [--message ID]... [--wait]
  factflow prepare                                             make the embedded database template once (the
                                                                install runs it), so new data directories skip initdb
  factflow dlq list [--queue Q [--execution ID]] | show --queue Q ID | redrive --queue Q [ID] [--force] | discard --queue Q ID
                         redrive refuses queues of executions that are over (use factflow replay);
                         --force redrives anyway

Options:
  --json                 machine-readable output (every read command)
  --server URL           talk to a server (env FACTFLOW_SERVER_URL); without it commands use
                         the local data directory in process
  --token T              API token (env FACTFLOW_API_TOKEN)
  --settings FILE        settings file (env FACTFLOW_SETTINGS_FILE)
  --data-dir DIR         data directory (env FACTFLOW_DATA_DIR, default .factflow)
  --provider NAME        embedded | rabbitmq | artemis | redis | pulsar (env FACTFLOW_PROVIDER)
  --lineage MODE         database (default) | memory: lineage and executions in this process only,
                         nothing persisted (env FACTFLOW_LINEAGE)
  --limit N --offset N   paging of list commands

Exit codes: 0 success (run: execution completed), 1 failed, 2 usage or config error,
3 run stalled (--stall-timeout passed, or nothing left in the process could make progress).`;

const OPTIONS = {
  json: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
  wait: { type: "boolean", default: false },
  force: { type: "boolean", default: false },
  insecure: { type: "boolean", default: false },
  "older-than-days": { type: "string" },
  server: { type: "string" },
  token: { type: "string" },
  settings: { type: "string" },
  "data-dir": { type: "string" },
  provider: { type: "string" },
  lineage: { type: "string" },
  input: { type: "string" },
  status: { type: "string" },
  config: { type: "string" },
  "config-version": { type: "string" },
  route: { type: "string" },
  kind: { type: "string" },
  message: { type: "string", multiple: true },
  from: { type: "string" },
  queue: { type: "string" },
  execution: { type: "string" },
  subscription: { type: "string" },
  limit: { type: "string" },
  offset: { type: "string" },
  host: { type: "string" },
  port: { type: "string" },
  "stall-after": { type: "string" },
  "stall-timeout": { type: "string" },
} as const;

/** Runs one command line; returns the exit code. Never throws for expected failures. */
export async function main(
  argv: readonly string[],
  io: { output?: Output; env?: Record<string, string | undefined>; cwd?: string } = {},
): Promise<number> {
  const output = io.output ?? processOutput;
  let parsed: ReturnType<
    typeof parseArgs<{ args: string[]; options: typeof OPTIONS; allowPositionals: true }>
  >;
  try {
    parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (error) {
    output.err(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const [command, ...rest] = parsed.positionals;
  const ctx: CliContext = {
    flags: parsed.values as Flags,
    output,
    env: io.env ?? process.env,
    cwd: io.cwd ?? process.cwd(),
  };
  if (command === undefined || ctx.flags.help || command === "help") {
    output.out(USAGE);
    return command === undefined && !ctx.flags.help ? 2 : 0;
  }
  try {
    // Each command module is imported when used: `config validate` never loads the database or providers.
    switch (command) {
      case "run":
        return await (await import("./commands/run.js")).runCommand(ctx, rest);
      case "serve":
        return await (await import("./commands/serve.js")).serveCommand(ctx);
      case "config":
        return await (await import("./commands/config.js")).configCommand(ctx, rest);
      case "executions":
        return await (await import("./commands/executions.js")).executionsCommand(ctx, rest);
      case "lineage":
        return await (await import("./commands/lineage.js")).lineageCommand(ctx, rest);
      case "replay":
        return await (await import("./commands/lineage.js")).replayCommand(ctx, rest);
      case "dlq":
        return await (await import("./commands/dlq.js")).dlqCommand(ctx, rest);
      case "prepare":
        return await (await import("./commands/prepare.js")).prepareCommand(ctx);
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      output.err(`${error.message}\n(factflow --help lists the commands)`);
      return 2;
    }
    if (error instanceof ConfigError) {
      output.err(error.message);
      return 2;
    }
    if (error instanceof ApiError) {
      output.err(`error (${error.code}): ${error.message}`);
      for (const issue of error.issues ?? []) output.err(`  - ${issue.path}: ${issue.message}`);
      return 1;
    }
    output.err(`error: ${(error as Error).message ?? String(error)}`);
    return 1;
  }
}
