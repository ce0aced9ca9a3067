import { fileURLToPath } from "node:url";
import { type DeliveryRecorder, type FixtureProcess, spawnFixture, waitFor } from "@factflow/infra-testkit";
import { expect } from "vitest";
import type { RedisProvider } from "../src/index.js";
import { REDIS_URL } from "./helpers.js";

const packageDir = fileURLToPath(new URL("..", import.meta.url));
const fixture = fileURLToPath(new URL("./fixtures/consumer-child.ts", import.meta.url));

/** A consumer in a process of its own that takes deliveries and never settles them, until killed. */
export interface DoomedConsumer {
  readonly child: FixtureProcess;
  /** Ids of the messages it was handed. */
  readonly got: ReadonlySet<string>;
  /** True once it has subscribed. */
  ready(): boolean;
}

/** Starts fixtures/consumer-child.ts on `queue`, under `node` when given. */
export function startDoomedConsumer(options: {
  readonly keyPrefix: string;
  readonly queue: string;
  readonly visibilityTimeoutMs: number;
  readonly prefetch: number;
  readonly node?: string;
}): DoomedConsumer {
  const got = new Set<string>();
  let ready = false;
  const args = [REDIS_URL, options.keyPrefix, options.queue, String(options.visibilityTimeoutMs)];
  args.push(String(options.prefetch), ...(options.node === undefined ? [] : [options.node]));
  const child = spawnFixture(fixture, args, {
    cwd: packageDir,
    onLine: (line) => {
      if (line === "READY") ready = true;
      else if (line.startsWith("GOT ")) got.add(line.slice(4));
    },
  });
  return { child, got, ready: () => ready };
}

/**
 * Waits for `doomed` to subscribe, publishes `count` messages to `queue` with `provider` and waits
 * until `doomed` holds every one; returns their ids.
 */
export async function publishToDoomed(
  provider: RedisProvider,
  doomed: DoomedConsumer,
  queue: string,
  count: number,
): Promise<string[]> {
  const { child } = doomed;
  await waitFor(() => doomed.ready() || child.proc.exitCode !== null, {
    timeoutMs: 60_000,
    description: () => `the child consumer to subscribe (stderr: ${child.stderr})`,
  });
  expect(child.proc.exitCode, `the child exited early: ${child.stderr}`).toBeNull();
  const ids: string[] = [];
  for (let n = 0; n < count; n++) ids.push((await provider.publish(queue, { body: { n } })).id);
  await waitFor(() => ids.every((id) => doomed.got.has(id)), {
    timeoutMs: 30_000,
    description: () => `the child to take all ${count} messages (has ${doomed.got.size})`,
  });
  return ids;
}

/** Kills `doomed` with SIGKILL and waits until it is gone. */
export async function killDoomed(doomed: DoomedConsumer): Promise<void> {
  doomed.child.proc.kill("SIGKILL");
  expect(await doomed.child.exited).toBe("SIGKILL");
}

/**
 * Checks that `survivor` acknowledged every one of `ids` as a redelivery, once each, and that
 * `provider` counted exactly those acks and redeliveries.
 */
export async function expectTakenOver(
  provider: RedisProvider,
  survivor: DeliveryRecorder,
  ids: readonly string[],
): Promise<void> {
  await survivor.waitForIds(ids, { status: "ACKNOWLEDGED", timeoutMs: 30_000 });
  expect(
    survivor.deliveries.every((d) => d.redelivered),
    "taken-over deliveries are flagged redelivered",
  ).toBe(true);
  expect(survivor.duplicates()).toEqual(new Map());
  // The handler's answer is seen before its XACK completes (acks go out in batches): wait for
  // the acks to be counted, then check the counts exactly.
  await waitFor(() => provider.counters().acked >= ids.length, {
    timeoutMs: 30_000,
    description: () => `the survivor's ${ids.length} acks (counters ${JSON.stringify(provider.counters())})`,
  });
  expect(provider.counters()).toMatchObject({ acked: ids.length, redelivered: ids.length, lost: 0 });
}
