import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { ConfigError } from "@factflow/protocols";
import { ApiError } from "../api-client.js";
import { type CliContext, openBackend, UsageError } from "../context.js";
import { json, table } from "../output.js";
import { showExecution, watchExecution } from "./executions.js";
import { parseInput } from "./run.js";

type Entry = { name: string; origin: string; version: number | null; routes: string[]; description?: string };

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
  // A file validated here is the user's own: its directory may hold its adapter modules.
  const backend = await openBackend(
    ctx,
    sub === "validate" ? { adapterDir: dirname(resolve(ctx.cwd, target as string)) } : {},
  );
  try {
    const { client } = backend;
    if (sub === "list") {
      const { items } = await client.get<{ items: Entry[] }>("/api/v1/configs");
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
      const config = await client.get<{ source: string }>(
        `/api/v1/configs/${encodeURIComponent(name)}${version === undefined ? "" : `?version=${version}`}`,
      );
      ctx.output.out(ctx.flags.json ? json(config) : config.source);
      return 0;
    }
    if (sub === "validate") {
      const path = resolve(ctx.cwd, name);
      const source = await readFile(path, "utf8").catch(() => {
        throw new UsageError(`cannot read ${path}; check the path`);
      });
      // Locally the file's own directory anchors relative adapter_modules; remotely the server decides.
      const result =
        backend.runtime === undefined
          ? await client.post<{ valid: boolean; issues: { path: string; message: string; line?: number }[] }>(
              "/api/v1/configs/validate",
              { source },
            )
          : await backend.runtime.parseConfig(source, path).then(
              () => ({ valid: true, issues: [] }),
              (error: unknown) => {
                if (error instanceof ConfigError) return { valid: false, issues: [...error.issues] };
                throw error;
              },
            );
      if (ctx.flags.json) ctx.output.out(json(result));
      else if (result.valid) ctx.output.out(`${name}: valid`);
      else
        for (const issue of result.issues)
          ctx.output.out(
            `${name}${issue.line === undefined ? "" : `:${issue.line}`}: ${issue.path}: ${issue.message}`,
          );
      return result.valid ? 0 : 1;
    }
    const input = await parseInput(ctx.flags.input, ctx.cwd);
    const version = ctx.flags["config-version"];
    const created = await client.post<{ id: string; status: string }>("/api/v1/executions", {
      config: name,
      ...(version === undefined ? {} : { version: Number(version) }),
      ...(input === null ? {} : { input }),
    });
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
    showExecution(ctx, await client.get(`/api/v1/executions/${created.id}?snapshot=true`));
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
