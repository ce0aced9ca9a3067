import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { ConfigError, type ConfigIssue } from "@factflow/protocols";
import { ApiError } from "../api-client.js";
import { type CliContext, openBackend, serverUrlOf, settingsOf, UsageError } from "../context.js";
import { importModule } from "../module-importer.js";
import { json, table } from "../output.js";
import { getExecution, showExecution, watchExecution } from "./executions.js";
import { parseInput } from "./run.js";

/** `factflow config list | show NAME | validate FILE | run NAME [--input JSON] [--wait]`. */
export async function configCommand(ctx: CliContext, args: readonly string[]): Promise<number> {
  const [sub, target] = args;
  if (sub === undefined || !["list", "show", "validate", "run"].includes(sub)) {
    throw new UsageError(
      "usage: factflow config list | show NAME | validate FILE | run NAME [--input JSON] [--wait]",
    );
  }
  if (sub !== "list" && target === undefined)
    throw new UsageError(`factflow config ${sub} needs ${sub === "validate" ? "a file" : "a config name"}`);
  if (sub === "validate") return validateCommand(ctx, target as string);
  const backend = await openBackend(ctx);
  try {
    const { client } = backend;
    if (sub === "list") {
      const { items } = await client.call(client.api.api.v1.configs.$get());
      ctx.output.out(
        ctx.flags.json
          ? json(items)
          : table(
              ["name", "origin", "version", "routes", "description"],
              items.map((c) => [c.name, c.origin, c.version, c.routes.join(","), c.description]),
            ),
      );
      return 0;
    }
    const name = target as string;
    if (sub === "show") {
      const version = ctx.flags["config-version"];
      const config = await client.call(
        client.api.api.v1.configs[":name"].$get({
          param: { name },
          query: version === undefined ? {} : { version },
        }),
      );
      ctx.output.out(ctx.flags.json ? json(config) : config.source);
      return 0;
    }
    const input = await parseInput(ctx.flags.input, ctx.cwd);
    const version = ctx.flags["config-version"];
    const created = await client.call(
      client.api.api.v1.executions.$post({
        json: {
          config: name,
          ...(version === undefined ? {} : { version: Number(version) }),
          ...(input === null ? {} : { input }),
        },
      }),
    );
    // In process, the execution lives only as long as this command: always wait for it.
    if (!ctx.flags.wait && backend.runtime === undefined) {
      ctx.output.out(
        ctx.flags.json
          ? json(created)
          : `started execution ${created.id} (factflow executions watch ${created.id})`,
      );
      return 0;
    }
    if (!ctx.flags.json) ctx.output.out(`started execution ${created.id}`);
    const status = await watchExecution(ctx, client, created.id);
    showExecution(ctx, await getExecution(client, created.id, { snapshot: true }));
    return status === "completed" ? 0 : 1;
  } catch (error) {
    if (error instanceof ApiError && error.issues !== undefined) {
      ctx.output.err(error.message);
      return 1;
    }
    throw error;
  } finally {
    await backend.close();
  }
}

/**
 * `factflow config validate FILE`. Locally it only parses and checks (no database, broker or
 * data-directory lock, so it works beside a running server); the file's own directory anchors
 * relative `adapter_modules`. With `--server` the server validates, with its own adapters.
 */
async function validateCommand(ctx: CliContext, file: string): Promise<number> {
  const path = resolve(ctx.cwd, file);
  const source = await readFile(path, "utf8").catch(() => {
    throw new UsageError(`cannot read ${path}; check the path`);
  });
  const server = serverUrlOf(ctx);
  // `line` may be undefined after a JSON round trip (the typed client says so).
  let result: {
    valid: boolean;
    issues: readonly (ConfigIssue | { path: string; message: string; line?: number | undefined })[];
  };
  if (server !== undefined) {
    const backend = await openBackend(ctx);
    try {
      result = await backend.client.validateConfig(source);
    } finally {
      await backend.close();
    }
  } else {
    const { createConfigValidator } = await import("@factflow/runtime");
    const parse = createConfigValidator(await settingsOf(ctx, { adapterDir: dirname(path) }), {
      importModule,
    });
    result = await parse(source, path).then(
      () => ({ valid: true, issues: [] }),
      (error: unknown) => {
        if (error instanceof ConfigError) return { valid: false, issues: error.issues };
        throw error;
      },
    );
  }
  if (ctx.flags.json) ctx.output.out(json(result));
  else if (result.valid) ctx.output.out(`${file}: valid`);
  else
    for (const issue of result.issues)
      ctx.output.out(
        `${file}${issue.line === undefined ? "" : `:${issue.line}`}: ${issue.path}: ${issue.message}`,
      );
  return result.valid ? 0 : 1;
}
