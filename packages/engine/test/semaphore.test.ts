import { describe, expect, it } from "vitest";
import { Semaphore, Watermark } from "../src/delivery/semaphore.js";

describe("Semaphore", () => {
  it("grants permits in FIFO order and never more than it has", async () => {
    const sem = new Semaphore(2);
    const order: number[] = [];
    await sem.acquire();
    await sem.acquire();
    const waiters = [1, 2, 3].map((n) => sem.acquire().then(() => order.push(n)));
    expect(sem.waiting).toBe(3);
    sem.release();
    await waiters[0];
    expect(order).toEqual([1]);
    sem.release();
    sem.release();
    await Promise.all(waiters);
    expect(order).toEqual([1, 2, 3]);
    expect(sem.available).toBe(0);
  });

  it("drops a waiter whose signal aborts, so its permit goes to the next one", async () => {
    const sem = new Semaphore(1);
    await sem.acquire();
    const controller = new AbortController();
    const aborted = sem.acquire(controller.signal);
    const next = sem.acquire();
    controller.abort(new Error("stop"));
    await expect(aborted).rejects.toThrow("stop");
    sem.release();
    await next;
    expect(sem.waiting).toBe(0);
  });
});

describe("Watermark", () => {
  it("holds new work while pending publishes are at the high-water mark", async () => {
    const mark = new Watermark(2);
    mark.add(2);
    let passed = false;
    const wait = mark.whenBelow().then(() => {
      passed = true;
    });
    await Promise.resolve();
    expect(passed).toBe(false);
    mark.done(1);
    await wait;
    expect(passed).toBe(true);
  });
});

describe("waits on a signal that has already aborted", () => {
  it("reject at once, for a permit and for the watermark alike", async () => {
    const controller = new AbortController();
    controller.abort(new Error("cancelled before"));
    const sem = new Semaphore(1);
    await sem.acquire();
    await expect(sem.acquire(controller.signal)).rejects.toThrow("cancelled before");
    expect(sem.waiting).toBe(0);
    const watermark = new Watermark(1);
    watermark.add(1);
    await expect(watermark.whenBelow(controller.signal)).rejects.toThrow("cancelled before");
  });
});
