import { afterAll, describe, it } from "vitest";
import { registerBadInput } from "./groups/bad-input.js";
import { registerCleanup } from "./groups/cleanup.js";
import { registerDeadLetters } from "./groups/dead-letters.js";
import { registerFaults } from "./groups/faults.js";
import { registerIncomplete } from "./groups/incomplete.js";
import { registerLifecycle } from "./groups/lifecycle.js";
import { registerLatency, registerStall } from "./groups/link-faults.js";
import { registerMultiInstance } from "./groups/multi-instance.js";
import { registerNeverSettles } from "./groups/never-settles.js";
import { registerOrderedGroups } from "./groups/ordered-groups.js";
import { registerOrdering } from "./groups/ordering.js";
import { registerPauseResume } from "./groups/pause-resume.js";
import { registerPurge } from "./groups/purge.js";
import { registerQueues } from "./groups/queues.js";
import { registerReleasedSignals } from "./groups/released-signals.js";
import { registerRetry } from "./groups/retry.js";
import { registerSettlement } from "./groups/settlement.js";
import { registerStats } from "./groups/stats.js";
import { registerTopicFailure } from "./groups/topic-failure.js";
import { registerTopics } from "./groups/topics.js";
import { registerVerdicts } from "./groups/verdicts.js";
import { SuiteEnv } from "./harness.js";
import { type ConformanceOptions, type ResolvedOptions, resolveOptions } from "./options.js";
import type { Availability } from "./probe-tcp.js";
import { GROUPS, SuiteReport } from "./report.js";

/** True when a missing service must fail the run instead of skipping (set by CI). */
function servicesRequired(): boolean {
  return process.env.FACTFLOW_REQUIRE_SERVICES === "1";
}

/** What to do when the broker is (not) available: run, report every group as not run, or fail. */
export type UnavailablePlan =
  | { readonly kind: "run" }
  | { readonly kind: "skip"; readonly reason: string }
  | { readonly kind: "fail"; readonly message: string };

/** Decides how a run proceeds given the probe result; pure, so the decision is unit-tested. */
export function planForUnavailable(
  title: string,
  available: Availability,
  required: boolean,
): UnavailablePlan {
  if (available.ok) return { kind: "run" };
  const reason = `${title} is not available: ${available.reason}`;
  if (required) {
    return {
      kind: "fail",
      message: `[factflow/infra-testkit] ${reason}; FACTFLOW_REQUIRE_SERVICES=1 makes a missing service a failure`,
    };
  }
  return { kind: "skip", reason };
}

/**
 * Registers the provider conformance suite as vitest tests. Call it at the top level of a test file:
 *
 * ```ts
 * runConformanceSuite({
 *   name: "rabbitmq",
 *   available: await probeTcp("127.0.0.1", 5672),
 *   createProvider: (override) => createRabbitmqProvider({ url: urlFor(override) }),
 *   faults: { kind: "tcp", target: { host: "127.0.0.1", port: 5672 } },
 * });
 * ```
 *
 * Every group runs against every provider; a group that does not apply is reported as not run with
 * the capability that excludes it, and a table of what ran is printed at the end.
 */
export function runConformanceSuite(options: ConformanceOptions): void {
  const resolved = resolveOptions(options);
  const title = resolved.label === undefined ? resolved.name : `${resolved.name} (${resolved.label})`;
  const report = new SuiteReport(title);

  describe(`conformance: ${title}`, () => {
    const plan = planForUnavailable(title, resolved.available, servicesRequired());
    if (plan.kind === "fail") {
      it("the service is required (FACTFLOW_REQUIRE_SERVICES=1)", () => {
        throw new Error(plan.message);
      });
      return;
    }
    if (plan.kind === "skip") {
      console.warn(`[factflow/infra-testkit] skipping the ${title} conformance suite: ${plan.reason}`);
      for (const group of GROUPS) {
        it(group, (context) => {
          report.notRun(group, plan.reason);
          context.skip(`not run: ${plan.reason}`);
        });
      }
      afterAll(() => console.info(report.render()));
      return;
    }
    registerGroups(resolved, report);
  });
}

function registerGroups(resolved: ResolvedOptions, report: SuiteReport): void {
  const env = new SuiteEnv(resolved, report);
  describe("lifecycle", () => registerLifecycle(env));
  describe("queues", () => registerQueues(env));
  describe("topics", () => registerTopics(env));
  describe("multi-instance", () => registerMultiInstance(env));
  describe("settlement", () => registerSettlement(env));
  describe("retry", () => registerRetry(env));
  describe("incomplete handlers", () => registerIncomplete(env));
  describe("handlers that never settle", () => registerNeverSettles(env));
  describe("released signals", () => registerReleasedSignals(env));
  describe("topic failure", () => registerTopicFailure(env));
  describe("dead letters", () => registerDeadLetters(env));
  describe("verdicts", () => registerVerdicts(env));
  describe("cleanup", () => registerCleanup(env));
  describe("purge", () => registerPurge(env));
  describe("stats", () => registerStats(env));
  describe("ordering", () => registerOrdering(env));
  describe("ordered groups", () => registerOrderedGroups(env));
  describe("pause/resume", () => registerPauseResume(env));
  describe("bad input", () => registerBadInput(env));
  describe("faults", () => {
    registerFaults(env);
    registerStall(env);
    registerLatency(env);
  });

  afterAll(async () => {
    console.info(`${report.render()}\nexpectations (${resolved.name}): ${resolved.expectations.note}`);
    if (resolved.cleanup !== undefined) await resolved.cleanup([...env.destinations]);
  });
}
