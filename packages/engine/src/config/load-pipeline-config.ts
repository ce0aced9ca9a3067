import { dirname, resolve } from "node:path";
import { performance } from "node:perf_hooks";
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
import * as v from "valibot";
import {
  Composer,
  type CST,
  type Document,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  Lexer,
  LineCounter,
  type Node,
  Parser,
} from "yaml";
import type { AdapterRegistry } from "./adapter-registry.js";
import { checkPipelineSemantics, type RawIssue } from "./config-checks.js";
import { checkQueueCapabilities } from "./route-queue-options.js";

/** Options of `loadPipelineConfig`. */
export interface LoadPipelineConfigOptions {
  /** Path of the file the source came from: names it in errors and anchors relative `adapter_modules`. */
  readonly path?: string;
  /**
   * What errors call the source instead of `path`, for a source that is no file of the caller's:
   * a config uploaded to a server, whose `path` is only where relative `adapter_modules` resolve.
   */
  readonly label?: string;
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
/**
 * YAML 1.2's core schema, plain data only: no merge keys, and no YAML 1.1 types by explicit tag
 * (`!!binary`, `!!timestamp`, `!!set`...); an unknown tag is an issue, never a type. Duplicate keys
 * are found by `checkNodes` in one pass (the composer's own check compares each key with every
 * earlier key of its map, quadratic in the map's size).
 */
const YAML_OPTIONS = {
  version: "1.2",
  schema: "core",
  merge: false,
  resolveKnownTags: false,
  uniqueKeys: false,
  logLevel: "silent",
} as const;
/** Longest the parser runs before other work of the process gets a turn, in milliseconds. */
const PARSE_SLICE_MS = 10;

/**
 * Parses, validates and freezes a pipeline config. Every problem (YAML syntax, limits, schema,
 * semantics) is collected with its path and line into one `ConfigError`;
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
  const named = options.label ?? options.path;
  const subject = `[factflow/engine] pipeline config${named === undefined ? "" : ` "${named}"`}`;
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
  const { data, lineOf } = await parseYaml(source, subject, maxDepth);
  const toIssue = (raw: RawIssue): ConfigIssue =>
    withLine({ path: formatPath(raw.path), message: raw.message }, lineOf(raw.path));

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

interface ParsedYaml {
  readonly data: unknown;
  /** The line of the deepest node on a path that exists (the key's line, for map entries). */
  readonly lineOf: (path: readonly (string | number)[]) => number | undefined;
}

/**
 * YAML text → plain data, and the positions of its nodes, from one parse. The parser runs lexeme
 * by lexeme so that nesting deeper than the limit is refused as soon as it is read (composing
 * recurses once per level, so it must never see such nesting), and large sources let other work
 * of the process run between slices. Syntax errors, unknown tags, duplicate keys and unknown
 * aliases are issues with their line.
 */
async function parseYaml(source: string, subject: string, maxDepth: number): Promise<ParsedYaml> {
  const lineCounter = new LineCounter();
  const lineAt = (offset: number | undefined): number | undefined =>
    offset === undefined ? undefined : lineCounter.linePos(offset).line;
  const fail = (message: string, offset: number | undefined): never => {
    throw new ConfigError(subject, [withLine({ path: "$", message }, lineAt(offset))]);
  };
  const tooDeep = `the YAML is nested more than ${maxDepth} levels deep; flatten it (the limit is ${maxDepth})`;

  const parser = new Parser(lineCounter.addNewLine);
  lineCounter.addNewLine(0);
  const tokens: CST.Token[] = [];
  // The parser's stack holds the document, one entry per open collection and the scalar being
  // read. Data one level over the limit still gets through, so the limit check after composing
  // names its path.
  const maxStack = maxDepth + 3;
  let lexemes = 0;
  let sliceStart = performance.now();
  for (const lexeme of new Lexer().lex(source)) {
    for (const token of parser.next(lexeme)) tokens.push(token);
    if (parser.stack.length > maxStack) fail(tooDeep, parser.offset);
    if (++lexemes % 512 === 0 && performance.now() - sliceStart > PARSE_SLICE_MS) {
      await nextTurn();
      sliceStart = performance.now();
    }
  }
  for (const token of parser.end()) tokens.push(token);

  const documents = [...new Composer(YAML_OPTIONS).compose(tokens, true, source.length)];
  const [document, second] = documents;
  if (document === undefined) return { data: undefined, lineOf: () => undefined };
  if (second !== undefined)
    fail("YAML syntax: expected a single document in the stream, but found more", second.range[0]);
  const error = document.errors[0];
  if (error !== undefined) fail(`YAML syntax: ${error.message}`, error.pos[0]);
  const tag = document.warnings.find((warning) => warning.code === "TAG_RESOLVE_FAILED");
  if (tag !== undefined)
    fail(`YAML syntax: ${tag.message}; configs hold plain data only (no custom tags)`, tag.pos[0]);
  const root = document.contents as Node | null;
  const problem = checkNodes(root, document);
  if (problem !== undefined) fail(`YAML syntax: ${problem.message}`, problem.offset);

  await nextTurn();
  let data: unknown;
  try {
    // Aliases are converted once and shared (as they were written); the expansion limit in
    // `checkLimits` counts what they repeat.
    data = document.toJS({ maxAliasCount: -1 });
  } catch (error) {
    if (error instanceof RangeError) fail(tooDeep, undefined);
    throw error;
  }
  return { data, lineOf: (path) => lineOf(root, path, lineAt, document) };
}

/**
 * Duplicate keys, collections used as keys and aliases without an anchor, found in one iterative
 * pass over the composed nodes (aliases are not followed: each node is visited once).
 */
function checkNodes(
  root: Node | null,
  document: Document.Parsed,
): { message: string; offset: number | undefined } | undefined {
  const pending: unknown[] = [root];
  for (let node = pending.pop(); pending.length > 0 || node !== undefined; node = pending.pop()) {
    if (isAlias(node)) {
      if (node.resolve(document) === undefined)
        return { message: `unidentified alias "${node.source}"`, offset: node.range?.[0] };
    } else if (isMap(node)) {
      const keys = new Set<string>();
      for (const { key, value } of node.items) {
        const offset = (key as Node | null)?.range?.[0];
        const plain = isAlias(key) ? key.resolve(document) : key;
        if (isAlias(key) && plain === undefined)
          return { message: `unidentified alias "${key.source}"`, offset };
        if (plain !== null && !isScalar(plain))
          return { message: "a map key must be a plain value, not a list or a map", offset };
        const name = String(isScalar(plain) ? plain.value : null);
        if (keys.has(name)) return { message: `duplicated mapping key "${name}"`, offset };
        keys.add(name);
        pending.push(value);
      }
    } else if (isSeq(node)) {
      for (const item of node.items) pending.push(item);
    }
  }
  return undefined;
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

/** Map nodes indexed by key, built the first time an issue looks a key up in them. */
const keyIndexes = new WeakMap<object, Map<string, MapEntry>>();

interface MapEntry {
  readonly key: unknown;
  readonly value: unknown;
}

function keyIndex(node: { items: readonly MapEntry[] }): Map<string, MapEntry> {
  let index = keyIndexes.get(node);
  if (index === undefined) {
    index = new Map();
    for (const entry of node.items) {
      if (isScalar(entry.key)) index.set(String(entry.key.value), entry);
    }
    keyIndexes.set(node, index);
  }
  return index;
}

/** The line of the deepest YAML node on `path` that exists (the key, for map entries). */
function lineOf(
  root: Node | null,
  path: readonly (string | number)[],
  lineAt: (offset: number | undefined) => number | undefined,
  document: Document.Parsed,
): number | undefined {
  let node: unknown = root;
  let line = lineAt((node as Node | null)?.range?.[0]);
  for (const segment of path) {
    if (isAlias(node)) node = node.resolve(document);
    if (isMap(node)) {
      const entry = keyIndex(node).get(String(segment));
      if (entry === undefined) break;
      line = lineAt((entry.key as Node).range?.[0]) ?? line;
      node = entry.value;
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
