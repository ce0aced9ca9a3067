import { DEFAULT_PREFETCH, MAX_PREFETCH } from "@factflow/protocols";
import { parseProviderConfig } from "@factflow/provider-kit";
import * as v from "valibot";

const int = (min: number, max: number) => v.pipe(v.number(), v.integer(), v.minValue(min), v.maxValue(max));

/** Settings of the embedded provider. */
export const EmbeddedConfigSchema = v.strictObject({
  /**
   * `memory` keeps everything in the process (lost on exit); `file` appends every change to a log
   * under `dataDir` and recovers it on `connect()`. @default "memory"
   */
  mode: v.optional(v.picklist(["memory", "file"]), "memory"),
  /** Directory the `file` mode owns (log, lock, moved-aside corrupt tails). @default ".factflow/queue" */
  dataDir: v.optional(v.pipe(v.string(), v.minLength(1)), ".factflow/queue"),
  /**
   * `true`: a publish resolves after `fdatasync` (survives power loss). `false`: after the write
   * reaches the OS (survives a killed process, not a crashed machine). @default true
   */
  fsync: v.optional(v.boolean(), true),
  /** How long the log gathers records into one write + fsync, in ms. @default 2 */
  groupCommitMs: v.optional(int(0, 1_000), 2),
  /** A batch is committed at once when it reaches this many bytes. @default 1048576 */
  groupCommitMaxBytes: v.optional(int(4_096, 268_435_456), 1_048_576),
  /**
   * The log is rewritten to its live records once it exceeds this size and is at least twice the
   * size of the live set. @default 67108864
   */
  compactAfterBytes: v.optional(int(4_096, 68_719_476_736), 67_108_864),
  /**
   * File mode: bytes (JSON body + headers, as `maxMessageBytes` counts them) of waiting messages kept
   * in memory. Beyond it a newly stored message keeps only its place, priority, delay and attempt in
   * memory; its body and headers stay in the log and are read back, a stretch of the log at a time,
   * when it is delivered. Memory mode ignores it (everything is in memory). @default 16777216
   */
  memoryBudgetBytes: v.optional(int(0, 68_719_476_736), 16_777_216),
  /**
   * Prefetch of a subscription that sets none (and whose queue definition sets none), raised to its
   * concurrency when that is larger; 1 to `MAX_PREFETCH` like every prefetch. @default 10
   */
  defaultPrefetch: v.optional(int(1, MAX_PREFETCH), DEFAULT_PREFETCH),
  /** Largest accepted message (JSON body + headers), in bytes. @default 4194304 */
  maxMessageBytes: v.optional(int(64, 268_435_456), 4_194_304),
});

/** What {@link createEmbeddedProvider} accepts. */
export type EmbeddedConfigInput = v.InferInput<typeof EmbeddedConfigSchema>;
/** The parsed, defaulted, frozen provider config. */
export type EmbeddedConfig = Readonly<v.InferOutput<typeof EmbeddedConfigSchema>>;

/** Validates, defaults and freezes a provider config; throws a `ConfigError` listing every issue. */
export function parseEmbeddedConfig(input: unknown): EmbeddedConfig {
  return Object.freeze(parseProviderConfig("embedded", EmbeddedConfigSchema, input));
}
