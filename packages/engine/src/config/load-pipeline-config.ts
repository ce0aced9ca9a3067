import { dirname, resolve } from "node:path";
import {
  ConfigError,
  type ConfigIssue,
  DEFAULT_MAX_JSON_DEPTH,
  findJsonHazard,
  type PipelineConfig,
  PipelineConfigSchema,
  type QueueProtocol,
  schemaIssueText,
} from "@factflow/protocols";
import { CORE_SCHEMA, load as loadYaml, YAMLException } from "js-yaml";
import * as v from "valibot";
import { isMap, isSeq, LineCounter, type Node, parseDocument } from "yaml";
import type { AdapterRegistry } from "./adapter-registry.js";
import { checkPipelineSemantics, type RawIssue } from "./config-checks.js";
import { checkQueueCapabilities } from "./route-queue-options.js";

/** Options of `loadPipelineConfig`. */
export interface LoadPipelineConfigOptions {
  /** Path of the file the source came from: names it in errors and anchors relative `adapter_modules`. */
  readonly path?: string;
  /** Largest accepted source, in bytes. @default 1_048_576 */
  readonly maxBytes?: number;
  /** Most routes a config may declare. @default 1000 */
  readonly maxRoutes?: number;
  /** Deepest nesting of maps and lists (adapter configs, the init message). @default 64 */
  readonly maxDepth?: number;
  /**
   * Most values the document may expand to. Guards against YAML alias bombs (aliases that repeat
   * large parts many times). @default 200_000
   */
  readonly maxValues?: number;
  /**
   * The adapter registry to check adapter types and configs against. `adapter_modules` are loaded
   * into it first, if its `ModuleAccess` allows them. Without it, adapter types are not checked.
   */
  readonly registry?: AdapterRegistry;
  /**
   * The queue provider the pipeline will run on: routes asking for what it cannot do (ordered
   * groups, priorities, FIFO) are reported. Without it, capabilities are checked when an execution starts.
   */
  readonly provider?: Pick<QueueProtocol, "name" | "capabilities">;
}

export const DEFAULT_MAX_CONFIG_BYTES = 1_048_576;
export const DEFAULT_MAX_CONFIG_ROUTES = 1000;
const DEFAULT_MAX_CONFIG_VALUES = 200_000;
/** Sources up to this size get line numbers on their issues (a second, slower parse that keeps positions). */
const MAX_BYTES_WITH_LINES = 65_536;

/**
 * Parses, validates and freezes a pipeline config. Every problem (YAML syntax, limits, schema,
 * semantics) is collected with its path (and line, for sources up to 64 KB) into one `ConfigError`;
 * nothing is started from an invalid config. Hostile sources are cheap to refuse: size, nesting,
 * alias expansion, NUL characters, lone surrogates and the route count are checked before the
 * schema runs, and every check is linear in the size of the source. Relative `adapter_modules`
 * entries are resolved against the config file's directory, so the frozen snapshot stays loadable
 * from anywhere (replay).
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
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_JSON_DEPTH;
  const data = parseYamlData(source, subject, maxDepth);
  const lines = lineFinder(source);
  const toIssue = (raw: RawIssue): ConfigIssue =>
    withLine({ path: formatPath(raw.path), message: raw.message }, lines(raw.path));

  // Each step below is linear; between them other work of the process (HTTP requests) gets a turn.
  await nextTurn();
  const limitIssue = checkLimits(data, options);
  if (limitIssue !== undefined) throw new ConfigError(subject, [toIssue(limitIssue)]);

  await nextTurn();
  const parsed = v.safeParse(PipelineConfigSchema, data);
  if (!parsed.success) {
    throw new ConfigError(
      subject,
      parsed.issues.map((issue) =>
        toIssue({
          path: (issue.path ?? []).map((p) => p.key as string | number),
          message: schemaIssueText(
            issue,
            'check its spelling and nesting against "Write a pipeline" in docs/guide.md',
          ),
        }),
      ),
    );
  }
  const baseDir = options.path === undefined ? process.cwd() : dirname(resolve(options.path));
  const config: PipelineConfig = {
    ...parsed.output,
    adapter_modules: parsed.output.adapter_modules.map((m) => (m.startsWith(".") ? resolve(baseDir, m) : m)),
  };
  const issues: ConfigIssue[] = [];
  if (options.registry !== undefined) {
    const failures = await options.registry.loadModules(config.adapter_modules, baseDir);
    for (const failure of failures)
      issues.push(toIssue({ path: ["adapter_modules", failure.index], message: failure.message }));
  }
  await nextTurn();
  issues.push(...checkPipelineSemantics(config, options.registry).map(toIssue));
  if (options.provider !== undefined) {
    const { name, capabilities } = options.provider;
    issues.push(...checkQueueCapabilities(config, capabilities, name).map(toIssue));
  }
  if (issues.length > 0) throw new ConfigError(subject, issues);
  return deepFreeze(config);
}

/** YAML text → plain data, with syntax errors (and nesting too deep for the parser) as issues. */
function parseYamlData(source: string, subject: string, maxDepth: number): unknown {
  try {
    // YAML 1.2's core schema: plain data only (no timestamps, binaries, merge keys or custom tags).
    // The parser's own depth guard stops hostile nesting early; the walk after it names the path.
    const options = { schema: CORE_SCHEMA, maxDepth: maxDepth + 2 };
    return loadYaml(source, options);
  } catch (error) {
    if (error instanceof YAMLException) {
      const message = error.reason.startsWith("nesting exceeded")
        ? `the YAML is nested more than ${maxDepth} levels deep; flatten it (the limit is ${maxDepth})`
        : `YAML syntax: ${error.reason}`;
      const issue: ConfigIssue = { path: "$", message };
      throw new ConfigError(subject, [
        withLine(issue, error.mark === undefined ? undefined : error.mark.line + 1),
      ]);
    }
    if (error instanceof RangeError) {
      throw new ConfigError(subject, [
        {
          path: "$",
          message: `the YAML is nested too deeply to parse; keep nesting under ${DEFAULT_MAX_JSON_DEPTH} levels`,
        },
      ]);
    }
    throw error;
  }
}

/** Nesting, expansion, characters and route count: checked before the schema walks the data. */
function checkLimits(data: unknown, options: LoadPipelineConfigOptions): RawIssue | undefined {
  const maxValues = options.maxValues ?? DEFAULT_MAX_CONFIG_VALUES;
  const hazard = findJsonHazard(data, {
    maxDepth: options.maxDepth ?? DEFAULT_MAX_JSON_DEPTH,
    maxNodes: maxValues,
  });
  if (hazard !== undefined) {
    const message =
      hazard.kind === "size"
        ? `the document expands to more than ${maxValues} values; YAML aliases (*name) that repeat large parts multiply it: use fewer aliases`
        : hazard.message;
    return { path: pathSegments(hazard.path), message };
  }
  const routes = (data as { routes?: unknown } | null)?.routes;
  const maxRoutes = options.maxRoutes ?? DEFAULT_MAX_CONFIG_ROUTES;
  if (routes !== null && typeof routes === "object") {
    const count = Object.keys(routes).length;
    if (count > maxRoutes)
      return {
        path: ["routes"],
        message: `declares ${count} routes, over the limit of ${maxRoutes}; split the pipeline or raise maxRoutes`,
      };
  }
  return undefined;
}

/** `$.routes.a[0]` → `["routes", "a", 0]` (for line lookup; keys with dots lose their line only). */
function pathSegments(path: string): (string | number)[] {
  const segments: (string | number)[] = [];
  for (const match of path.matchAll(/\.([^.[]+)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/g)) {
    if (match[1] !== undefined) segments.push(match[1]);
    else if (match[2] !== undefined) segments.push(Number(match[2]));
    else if (match[3] !== undefined) segments.push(JSON.parse(match[3]) as string);
  }
  return segments;
}

/**
 * Finds the line of a path. The fast parser keeps no positions, so a second parser that does runs
 * once, lazily, when an issue needs a line, and only for sources small enough to parse quickly.
 */
function lineFinder(source: string): (path: readonly (string | number)[]) => number | undefined {
  let root: Node | null | undefined;
  let lineAt: ((offset: number | undefined) => number | undefined) | undefined;
  return (path) => {
    if (source.length > MAX_BYTES_WITH_LINES) return undefined;
    if (lineAt === undefined) {
      const lineCounter = new LineCounter();
      try {
        root = parseDocument(source, { lineCounter, prettyErrors: false }).contents as Node | null;
      } catch {
        root = undefined;
      }
      lineAt = (offset) => (offset === undefined ? undefined : lineCounter.linePos(offset).line);
    }
    return lineOf(root, path, lineAt);
  };
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
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
