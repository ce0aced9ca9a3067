import { afterAll, describe, expect, it } from "vitest";
import { type ArtemisProvider, createArtemisProvider } from "../src/index.js";
import { ARTEMIS_URL, registerWithArtemis, runPrefix } from "./helpers.js";

// Artemis sends a SEND's RECEIPT before the queue has taken the message in; a count taken right
// after left it out about once in 200 tries on 2.40. `deleteDestination({ ifEmpty: true })` counts
// before it destroys, so without a flush of the queue first it could destroy a queue holding a
// message whose publish was already confirmed. Many back-to-back tries make that miss show.
const TRIES = 400;

await registerWithArtemis(
  "the confirmed-then-deleted test",
  "deleteDestination right after a confirmed publish (real Artemis)",
  () => {
    describe("deleteDestination right after a confirmed publish (real Artemis)", () => {
      const provider: ArtemisProvider = createArtemisProvider({ url: ARTEMIS_URL });
      const destinations: string[] = [];
      afterAll(async () => {
        for (const destination of destinations) await provider.destroy(destination).catch(() => {});
        await provider.close();
      });

      it(`ifEmpty refuses every queue whose one message was just confirmed (${TRIES} tries)`, async () => {
        await provider.connect();
        const prefix = runPrefix("confirmed");
        const deleted: string[] = [];
        for (let i = 0; i < TRIES; i++) {
          const destination = `/queue/${prefix}-${i}`;
          destinations.push(destination);
          await provider.publish(destination, { body: { i } });
          const result = await provider.admin.deleteDestination({ destination }, { ifEmpty: true });
          if (result.deleted) deleted.push(destination);
        }
        expect(deleted, "queues destroyed with a confirmed message in them").toEqual([]);
      }, 120_000);
    });
  },
);
