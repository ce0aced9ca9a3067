import { randomUUID } from "node:crypto";
import { createConnection } from "node:net";
import { type DeadLetterSource, ProviderError } from "@factflow/protocols";
import { expect } from "vitest";
import { deadLetterQueueName, resolveDestination, topicSubscriptionQueue } from "../src/naming.js";

/** Broker URL of the integration tests. */
export const RABBITMQ_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";

/** A unique, AMQP-safe prefix for one test run. */
export function uniquePrefix(label: string): string {
  return `fftest-${label}-${randomUUID().slice(0, 8)}`;
}

/** Resolves with `undefined` when the broker port accepts TCP, else with the reason. */
export function probeBroker(url = RABBITMQ_URL, timeoutMs = 2000): Promise<string | undefined> {
  const parsed = new URL(url);
  const port = Number(parsed.port || 5672);
  return new Promise((resolve) => {
    const socket = createConnection({ host: parsed.hostname, port });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(`no answer from ${parsed.hostname}:${port} within ${timeoutMs} ms`);
    }, timeoutMs);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.end();
      resolve(undefined);
    });
    socket.once("error", (error) => {
      clearTimeout(timer);
      resolve(`${parsed.hostname}:${port} unreachable: ${error.message}`);
    });
  });
}

/** Probes the broker once; warns (or, with FACTFLOW_REQUIRE_SERVICES=1, fails) when it is missing. */
export async function brokerUnavailable(): Promise<boolean> {
  const reason = await probeBroker();
  if (reason === undefined) return false;
  if (process.env.FACTFLOW_REQUIRE_SERVICES === "1") {
    throw new Error(`RabbitMQ is required (FACTFLOW_REQUIRE_SERVICES=1) but ${reason}; set RABBITMQ_URL`);
  }
  console.warn(`[factflow/rabbitmq] skipping integration tests: ${reason} (set RABBITMQ_URL)`);
  return true;
}

/** Polls `check` until it returns true or the deadline passes. */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Deletes queues and exchanges by name on a short-lived connection of its own (test clean-up). */
export async function deleteTopology(names: {
  queues: Iterable<string>;
  exchanges: Iterable<string>;
}): Promise<void> {
  const amqp = await import("amqplib");
  const connection = await amqp.connect(RABBITMQ_URL);
  try {
    for (const queue of new Set(names.queues)) {
      const channel = await connection.createChannel();
      channel.on("error", () => {});
      await channel.deleteQueue(queue).catch(() => {});
      await channel.close().catch(() => {});
    }
    for (const exchange of new Set(names.exchanges)) {
      const channel = await connection.createChannel();
      channel.on("error", () => {});
      await channel.deleteExchange(exchange).catch(() => {});
      await channel.close().catch(() => {});
    }
  } finally {
    await connection.close().catch(() => {});
  }
}

/** `RABBITMQ_URL` with its host and port swapped for `override` (the fault proxy). */
export function urlVia(override?: { host: string; port: number }): string {
  if (override === undefined) return RABBITMQ_URL;
  const url = new URL(RABBITMQ_URL);
  url.hostname = override.host;
  url.port = String(override.port);
  return url.toString();
}

/** The `ProviderError` that `work` throws; fails the test when it throws anything else or nothing. */
export function rejects(work: () => unknown): ProviderError {
  try {
    work();
  } catch (error) {
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  }
  throw new Error("expected a rejection");
}

/** The AMQP dead-letter queue of a queue, or of one subscription of a topic. */
export function deadLetterQueueOf(source: DeadLetterSource): string {
  const target = resolveDestination(source.destination);
  if (target.kind === "queue") return deadLetterQueueName(target.queue, "queue");
  return deadLetterQueueName(topicSubscriptionQueue(source.destination, source.subscription ?? ""), "topic");
}

/**
 * Stores one more copy of the dead letter `messageId` of `source`, as the broker holds it after a
 * publisher confirm of the dead-letter copy was lost: same body, properties and headers.
 */
export async function storeDeadLetterAgain(source: DeadLetterSource, messageId: string): Promise<void> {
  const amqp = await import("amqplib");
  const queue = deadLetterQueueOf(source);
  const connection = await amqp.connect(RABBITMQ_URL);
  try {
    const channel = await connection.createConfirmChannel();
    for (;;) {
      const message = await channel.get(queue, { noAck: false });
      if (message === false) throw new Error(`no dead letter ${messageId} in ${queue}`);
      if (message.properties.messageId !== messageId) continue;
      channel.sendToQueue(queue, message.content, message.properties);
      await channel.waitForConfirms();
      return;
    }
  } finally {
    // Closing returns every fetched message to its place.
    await connection.close();
  }
}
