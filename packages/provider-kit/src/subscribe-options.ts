import {
  DEFAULT_HANDLER_TIMEOUT_MS,
  DEFAULT_PREFETCH,
  DEFAULT_RETRY_POLICY,
  MAX_HANDLER_TIMEOUT_MS,
  MAX_PREFETCH,
  MAX_PRIORITY_LEVELS,
  type ProviderCapabilities,
  ProviderError,
  RETRY_POLICY_LIMITS,
  type RetryPolicy,
  type SettlementListener,
  type SubscribeOptions,
} from "@factflow/protocols";
import * as v from "valibot";

/** Longest subscription name or `groupBy` field name. */
const MAX_NAME_LENGTH = 200;

/** A value as an error message shows it: JSON where possible, so `"10"` and `10` differ. */
function shown(input: unknown): string {
  if (typeof input === "number" || typeof input === "bigint") return String(input);
  if (input === undefined) return "undefined";
  try {
    return JSON.stringify(input) ?? String(input);
  } catch {
    return String(input);
  }
}

interface Range {
  readonly min: number;
  readonly max: number;
  /** What the option means and how to fix it, after the range. */
  readonly hint: string;
}

/** An integer option in `[min, max]`; every failing step gives the same message. */
function integerIn(name: string, range: Range) {
  const message = (issue: v.BaseIssue<unknown>) =>
    `${name} must be an integer from ${range.min} to ${range.max}, got ${shown(issue.input)}: ${range.hint}`;
  return v.pipe(
    v.number(message),
    v.integer(message),
    v.minValue(range.min, message),
    v.maxValue(range.max, message),
  );
}

/** A number option in `[min, max]` (fractions allowed, as in the pipeline config). */
function numberIn(name: string, range: Range) {
  const message = (issue: v.BaseIssue<unknown>) =>
    `${name} must be a number from ${range.min} to ${range.max}, got ${shown(issue.input)}: ${range.hint}`;
  return v.pipe(v.number(message), v.minValue(range.min, message), v.maxValue(range.max, message));
}

/** A non-empty name of at most `MAX_NAME_LENGTH` characters. */
function nameOf(name: string, hint: string) {
  const message = (issue: v.BaseIssue<unknown>) =>
    `${name} must be a non-empty string of at most ${MAX_NAME_LENGTH} characters, got ${shown(issue.input)}: ${hint}`;
  return v.pipe(v.string(message), v.minLength(1, message), v.maxLength(MAX_NAME_LENGTH, message));
}

const limits = RETRY_POLICY_LIMITS;

/**
 * A partial retry policy as subscribe options take it; the ranges are protocols' `RETRY_POLICY_LIMITS`,
 * the same as a pipeline config's `retry:`. Missing fields come from `DEFAULT_RETRY_POLICY` (filled in
 * by {@link SubscribeOptionsSchema}).
 */
export const RetryOptionsSchema = v.object(
  {
    /** @default 3 */
    maxAttempts: v.optional(
      integerIn("retry.maxAttempts", {
        ...limits.maxAttempts,
        hint: "it counts deliveries including the first, so 1 means no retry",
      }),
    ),
    /** @default 1000 */
    initialDelayMs: v.optional(
      numberIn("retry.initialDelayMs", {
        ...limits.initialDelayMs,
        hint: "the wait before the second attempt, in milliseconds",
      }),
    ),
    /** @default 2 */
    multiplier: v.optional(
      numberIn("retry.multiplier", {
        ...limits.multiplier,
        hint: "each further wait is the previous one times this (1 keeps it constant)",
      }),
    ),
    /** @default 60000 */
    maxDelayMs: v.optional(
      numberIn("retry.maxDelayMs", {
        ...limits.maxDelayMs,
        hint: "the longest wait between two attempts, in milliseconds",
      }),
    ),
  },
  (issue) => `retry must be an object like { maxAttempts: 5 }, got ${shown(issue.input)}`,
);

const orderingMessage = (issue: v.BaseIssue<unknown>) =>
  `ordering must be "none" or "fifo", got ${shown(issue.input)}: "fifo" handles one message at a time in publish order (per group with groupBy)`;

/**
 * Each field of `SubscribeOptions` with its range, none of them filled in: what a caller may set.
 * Unknown fields are ignored, as TypeScript callers cannot pass them. A provider that takes the same
 * fields elsewhere (the embedded provider's queue definitions) builds its schema from these entries,
 * so the limits and messages stay the same.
 */
export const SubscribeFieldsSchema = v.object(
  {
    subscription: nameOf(
      "options.subscription",
      "name the subscription (competing consumers of a queue share a name; each topic subscription name gets its own copy)",
    ),
    prefetch: v.optional(
      integerIn("prefetch", {
        min: 1,
        max: MAX_PREFETCH,
        hint: `it bounds the deliveries handed to this consumer ahead of its handlers; leave it out for ${DEFAULT_PREFETCH}`,
      }),
    ),
    concurrency: v.optional(
      integerIn("concurrency", {
        min: 1,
        max: MAX_PREFETCH,
        hint: "it is the number of handlers running at once; leave it out for one at a time (to stop consuming, unsubscribe)",
      }),
    ),
    retry: v.optional(RetryOptionsSchema),
    ordering: v.optional(v.picklist(["none", "fifo"], orderingMessage)),
    groupBy: v.optional(
      nameOf(
        "groupBy",
        'name the body field (top-level, or a dotted path like "customer.id") whose value is the message\'s FIFO group',
      ),
    ),
    groupByHeader: v.optional(
      nameOf("groupByHeader", "name the header whose value is the message's FIFO group"),
    ),
    deadLetter: v.optional(
      v.boolean(
        (issue) =>
          `deadLetter must be true or false, got ${shown(issue.input)}: false drops a message whose attempts are spent`,
      ),
    ),
    maxPriority: v.optional(
      integerIn("maxPriority", {
        min: 1,
        max: MAX_PRIORITY_LEVELS,
        hint: "it is the number of priority levels the queue honours; messages carry priority 0 to 9",
      }),
    ),
    handlerTimeoutMs: v.optional(
      numberIn("handlerTimeoutMs", {
        min: 1,
        max: MAX_HANDLER_TIMEOUT_MS,
        hint: `the milliseconds a handler may run before it is aborted (at most one day); leave it out for ${DEFAULT_HANDLER_TIMEOUT_MS} (30 minutes)`,
      }),
    ),
    releasesSignal: v.optional(
      v.boolean(
        (issue) =>
          `releasesSignal must be true or false, got ${shown(issue.input)}: true promises the handler lets go of its signal once it settles`,
      ),
    ),
    onSettled: v.optional(
      v.custom<SettlementListener>(
        (input) => typeof input === "function",
        (issue) =>
          `onSettled must be a function, got ${shown(issue.input)}: it is called with each settled delivery's verdict`,
      ),
    ),
  },
  (issue) => `subscribe needs options like { subscription: "<name>" }, got ${shown(issue.input)}`,
);

type SubscribeFields = v.InferOutput<typeof SubscribeFieldsSchema>;

/** The fields the caller set (no `undefined` values), frozen. */
function requestedOf(fields: SubscribeFields): Readonly<SubscribeOptions> {
  const requested: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    if (key === "retry") {
      requested[key] = Object.freeze(
        Object.fromEntries(Object.entries(value as object).filter(([, field]) => field !== undefined)),
      );
    } else requested[key] = value;
  }
  return Object.freeze(requested) as Readonly<SubscribeOptions>;
}

/** Fills every default of validated fields; `requested` keeps what the caller set. */
function withDefaults(fields: SubscribeFields) {
  const retry = fields.retry;
  const concurrency = fields.concurrency ?? 1;
  return {
    subscription: fields.subscription,
    prefetch: fields.prefetch ?? Math.max(DEFAULT_PREFETCH, concurrency),
    concurrency,
    retry: Object.freeze({
      maxAttempts: retry?.maxAttempts ?? DEFAULT_RETRY_POLICY.maxAttempts,
      initialDelayMs: retry?.initialDelayMs ?? DEFAULT_RETRY_POLICY.initialDelayMs,
      multiplier: retry?.multiplier ?? DEFAULT_RETRY_POLICY.multiplier,
      maxDelayMs: retry?.maxDelayMs ?? DEFAULT_RETRY_POLICY.maxDelayMs,
    }),
    ordering: fields.ordering ?? "none",
    ...(fields.groupBy === undefined ? {} : { groupBy: fields.groupBy }),
    ...(fields.groupByHeader === undefined ? {} : { groupByHeader: fields.groupByHeader }),
    deadLetter: fields.deadLetter ?? true,
    ...(fields.maxPriority === undefined ? {} : { maxPriority: fields.maxPriority }),
    handlerTimeoutMs: fields.handlerTimeoutMs ?? DEFAULT_HANDLER_TIMEOUT_MS,
    releasesSignal: fields.releasesSignal ?? false,
    ...(fields.onSettled === undefined ? {} : { onSettled: fields.onSettled }),
    requested: requestedOf(fields),
  } satisfies ResolvedSubscribeOptions;
}

/**
 * The one schema of subscribe options, with every default and limit: `prefetch` 1–10000 (default 10,
 * or `concurrency` when larger), `concurrency` 1–`prefetch` (default 1), `retry` within
 * `RETRY_POLICY_LIMITS` (defaults `DEFAULT_RETRY_POLICY`), `ordering` `none`|`fifo` (default `none`),
 * `groupBy` a non-empty field name that needs `ordering: "fifo"`, `maxPriority` 1–10,
 * `handlerTimeoutMs` 1 ms to one day (default `DEFAULT_HANDLER_TIMEOUT_MS`, 30 minutes). Its output is
 * {@link ResolvedSubscribeOptions}. What a provider's capabilities allow is checked by
 * {@link resolveSubscribeOptions}, not here.
 */
export const SubscribeOptionsSchema = v.pipe(
  SubscribeFieldsSchema,
  v.transform(withDefaults),
  v.check(
    (options) => options.concurrency <= options.prefetch,
    (issue) => {
      const options = issue.input as { concurrency: number; prefetch: number };
      return `concurrency ${options.concurrency} is above prefetch ${options.prefetch}: a handler only runs on a delivery handed out ahead, so raise prefetch to at least ${options.concurrency} or lower concurrency`;
    },
  ),
  v.check(
    (options) => options.groupBy === undefined || options.ordering === "fifo",
    (issue) =>
      `groupBy ${shown((issue.input as { groupBy?: string }).groupBy)} needs ordering: "fifo" (message groups are FIFO lanes): add ordering: "fifo", or drop groupBy`,
  ),
  v.check(
    (options) => options.groupByHeader === undefined || options.ordering === "fifo",
    'groupByHeader needs ordering: "fifo" (message groups are FIFO lanes): add ordering: "fifo", or drop groupByHeader',
  ),
  v.check(
    (options) => options.groupBy === undefined || options.groupByHeader === undefined,
    "groupBy and groupByHeader are both set: a message group has one key, so keep one of them",
  ),
);

/** Subscribe options after validation, with every default filled in; frozen. */
export interface ResolvedSubscribeOptions extends SubscribeOptions {
  readonly subscription: string;
  readonly prefetch: number;
  readonly concurrency: number;
  readonly retry: RetryPolicy;
  readonly ordering: "none" | "fifo";
  readonly groupBy?: string;
  readonly groupByHeader?: string;
  readonly deadLetter: boolean;
  readonly maxPriority?: number;
  readonly handlerTimeoutMs: number;
  readonly releasesSignal: boolean;
  /**
   * The fields the caller set, validated, before defaults. A provider with defaults of its own per
   * queue (the embedded provider's `defineQueue`) reads these to tell "left out" from "set to the
   * default".
   */
  readonly requested: Readonly<SubscribeOptions>;
}

/** What the options are checked against: the provider's declared capabilities. */
export type SubscribeCapabilities = Pick<ProviderCapabilities, "fifo" | "messageGroups" | "priorities"> &
  Partial<Pick<ProviderCapabilities, "orderedGroups">>;

/** Where the options come from, for the error message. */
export interface SubscribeContext {
  /** Provider name, the `[factflow/<provider>]` prefix of the error. @default "provider-kit" */
  readonly provider?: string;
  /** The destination being subscribed to. */
  readonly destination?: string;
  /** What the message says was refused, instead of `subscribe to "<destination>"`. */
  readonly operation?: string;
}

/** Problems with options a provider's capabilities cannot honour (never silently ignored). */
function unsupported(options: SubscribeOptions, caps: SubscribeCapabilities): string[] {
  const problems: string[] = [];
  if (options.ordering === "fifo" && !caps.fifo) {
    problems.push(
      'ordering: "fifo" is not supported by this provider (capabilities.fifo is false): drop it, or use a provider that declares fifo',
    );
  }
  if (options.groupBy !== undefined && !caps.messageGroups) {
    problems.push(
      'groupBy is not supported by this provider (capabilities.messageGroups is false): drop groupBy; ordering: "fifo" alone handles one message at a time in publish order',
    );
  }
  const keyed = options.groupByHeader !== undefined || (options.groupBy?.includes(".") ?? false);
  if (keyed && caps.orderedGroups !== true) {
    problems.push(
      "a group key from a header or a dotted path needs ordered groups (capabilities.orderedGroups is not true on this provider): use a top-level groupBy field, or a provider that declares orderedGroups",
    );
  }
  if (options.maxPriority !== undefined && !caps.priorities) {
    problems.push(
      "maxPriority is not supported by this provider (capabilities.priorities is false): drop maxPriority; messages are then delivered in publish order",
    );
  }
  return problems;
}

/**
 * Validates subscribe options against the one schema and the provider's capabilities, and returns
 * them frozen with every default filled in. Every problem is reported at once, in a `ProviderError`
 * that is the same on every provider: reason `invalid-input`, code `invalid_argument`, not retryable,
 * and a message naming each option, its limit and how to fix it. Options the capabilities cannot
 * honour (`groupBy` without `messageGroups`, `maxPriority` without `priorities`, `ordering: "fifo"`
 * without `fifo`) are refused, never ignored.
 */
export function resolveSubscribeOptions(
  options: SubscribeOptions,
  capabilities: SubscribeCapabilities,
  context: SubscribeContext = {},
): ResolvedSubscribeOptions {
  const result = v.safeParse(SubscribeOptionsSchema, options);
  const problems = result.success
    ? unsupported(result.output, capabilities)
    : result.issues.map((issue) => issue.message);
  if (!result.success || problems.length > 0) {
    const subject =
      context.operation ??
      (context.destination === undefined ? "subscribe" : `subscribe to "${context.destination}"`);
    throw new ProviderError(
      context.provider ?? "provider-kit",
      "invalid-input",
      `${subject}: ${problems.join("; ")}`,
      { code: "invalid_argument", retryable: false },
    );
  }
  return Object.freeze(result.output);
}
