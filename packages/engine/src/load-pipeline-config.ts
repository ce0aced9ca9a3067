import { dirname, isAbsolute, resolve } from "node:path";
import {
  ConfigError,
  type ConfigIssue,
  type PipelineConfig,
  PipelineConfigSchema,
} from "@factflow/protocols";
import * as v from "valibot";
import { isMap, isSeq, LineCounter, type Node, parseDocument } from "yaml";
import type { AdapterRegistry } from "./adapter-registry.js";
import { checkPipelineSemantics, type RawIssue } from "./config-checks.js";

/** Options of `loadPipelineConfig`. */
export interface LoadPipelineConfigOptions {
  /** Path of the file the source came from: names it in errors and anchors relative `adapter_modules`. */
  readonly path?: string;
  /** Largest accepted source, in bytes. @default 1_048_576 */
  readonly maxBytes?: number;
  /**
   * The adapter registry to check adapter types and configs against. `adapter_modules` are loaded
   * into it first. Without it, adapter types are not checked.
   */
  readonly registry?: AdapterRegistry;
  /** Most aliases (`*name`) the YAML may dereference; guards against alias bombs. @default 50 */
  readonly maxAliasCount?: number;
}

export const DEFAULT_MAX_CONFIG_BYTES = 1_048_576;

/**
 * Parses, validates and freezes a pipeline config. Every problem (YAML syntax, schema, semantics)
 * is collected with its path and line into one `ConfigError`; nothing is started from an invalid
 * config. Relative `adapter_modules` entries are resolved against the config file's directory, so
 * the frozen snapshot stays loadable from anywhere (replay).
 */
export async function loadPipelineConfig(
  source: string,
  options: LoadPipelineConfigOptions = {},
): Promise<PipelineConfig> {
  const subject = `[factflow/engine] pipeline config${options.path === undefined ? "" : ` "${options.path}"`}`;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_CONFIG_BYTES;
  const size = Buffer.byteLength(source, "utf8");
  if (size > maxBytes) {
    throw new ConfigError(subject, [
      {
        path: "$",
        message: `the file is ${size} bytes, over the ${maxBytes}-byte limit; split it or raise maxBytes`,
      },
    ]);
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(source, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const lineAt = (offset: number | undefined) =>
    offset === undefined ? undefined : lineCounter.linePos(offset).line;
  if (doc.errors.length > 0) {
    throw new ConfigError(
      subject,
      doc.errors.map((e) =>
        withLine({ path: "$", message: `YAML syntax: ${e.message.split("\n")[0]}` }, lineAt(e.pos[0])),
      ),
    );
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: options.maxAliasCount ?? 50 });
  } catch (error) {
    throw new ConfigError(subject, [
      {
        path: "$",
        message: `YAML could not be expanded (${(error as Error).message}); use fewer aliases (*name)`,
      },
    ]);
  }
  const locate = (path: readonly (string | number)[]): ConfigIssue => ({
    path: formatPath(path),
    message: "",
  });
  const toIssue = (raw: RawIssue): ConfigIssue =>
    withLine({ ...locate(raw.path), message: raw.message }, lineOf(doc.contents, raw.path, lineAt));

  const parsed = v.safeParse(PipelineConfigSchema, data);
  if (!parsed.success) {
    throw new ConfigError(
      subject,
      parsed.issues.map((issue) =>
        toIssue({ path: (issue.path ?? []).map((p) => p.key as string | number), message: issue.message }),
      ),
    );
  }
  const baseDir = options.path === undefined ? process.cwd() : dirname(resolve(options.path));
  const config: PipelineConfig = {
    ...parsed.output,
    adapter_modules: parsed.output.adapter_modules.map((m) =>
      m.startsWith(".") || isAbsolute(m) ? resolve(baseDir, m) : m,
    ),
  };
  const issues: ConfigIssue[] = [];
  if (options.registry !== undefined) {
    const failures = await options.registry.loadModules(config.adapter_modules);
    for (const failure of failures)
      issues.push(toIssue({ path: ["adapter_modules", failure.index], message: failure.message }));
  }
  issues.push(...checkPipelineSemantics(config, options.registry).map(toIssue));
  if (issues.length > 0) throw new ConfigError(subject, issues);
  return deepFreeze(config);
}

function withLine(issue: ConfigIssue, line: number | undefined): ConfigIssue {
  return line === undefined ? issue : { ...issue, line };
}

/** `routes.parse.adapters[1].type` */
export function formatPath(path: readonly (string | number)[]): string {
  if (path.length === 0) return "$";
  return path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? p : `.${p}`)).join("");
}

/** The line of the deepest YAML node on `path` that exists (the key, for map entries). */
function lineOf(
  root: unknown,
  path: readonly (string | number)[],
  lineAt: (offset: number | undefined) => number | undefined,
): number | undefined {
  let node = root as Node | null | undefined;
  let line = lineAt((node as { range?: [number, number, number] } | null)?.range?.[0]);
  for (const segment of path) {
    if (isMap(node)) {
      const pair = node.items.find((item) => (item.key as { value?: unknown } | null)?.value === segment);
      if (pair === undefined) break;
      line = lineAt((pair.key as { range?: [number, number, number] } | null)?.range?.[0]) ?? line;
      node = pair.value as Node | null;
    } else if (isSeq(node) && typeof segment === "number") {
      const item = node.items[segment] as Node | undefined;
      if (item === undefined) break;
      line = lineAt(item.range?.[0]) ?? line;
      node = item;
    } else {
      break;
    }
  }
  return line;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const member of Object.values(value)) deepFreeze(member);
  }
  return value;
}
