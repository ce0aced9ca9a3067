import type { JsonValue, LineageRow, PipelineConfig } from "@factflow/protocols";
import { DEFAULT_LINEAGE_TREE_LIMIT } from "@factflow/protocols";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LineageDatabase, uuidv7 } from "../src/index.js";

/** How a dialect's test file hands a fresh, migrated database to the shared suite. */
export interface SuiteTarget {
  open(): Promise<LineageDatabase>;
  cleanup?(): Promise<void>;
}

const snapshot = {
  name: "demo",
  init: { route: "parse", message: {} },
  routes: { parse: { inbound: { queue: "parse.in" }, adapters: [{ type: "noop" }] } },
} as unknown as PipelineConfig;

export function row(executionId: string, over: Partial<LineageRow> = {}): LineageRow {
  // Message rows carry no adapter fields.
  const adapterFields = over.kind === "message" ? {} : { adapter: "noop", adapterIndex: 0 };
  return {
    id: uuidv7(),
    executionId,
    kind: "adapter",
    route: "parse",
    ...adapterFields,
    messageId: `m-${uuidv7()}`,
    correlationId: "c-1",
    attempt: 1,
    status: "pending",
    startedAt: new Date().toISOString(),
    ...over,
  };
}

/** Every query of both protocols, run against one dialect. Called once per dialect. */
export function lineageSuite(
  dialect: "pglite" | "postgres" | "memory",
  target: SuiteTarget,
  skip = false,
): void {
  // The in-memory store applies each write at once: no group commit to merge writes, no database to
  // reject a row.
  const database = dialect !== "memory";
  describe.skipIf(skip)(`lineage database on ${dialect}`, () => {
    let db: LineageDatabase;
    beforeAll(async () => {
      db = await target.open();
    });
    afterAll(async () => {
      await db?.close();
      await target.cleanup?.();
    });

    it("opens on the expected dialect and migrations are idempotent", async () => {
      expect(db.dialect).toBe(dialect);
      expect(await db.migrate()).toEqual([]);
    });

    it("saves config versions per name and lists the latest of each", async () => {
      const name = `cfg-${uuidv7().slice(-8)}`;
      const v1 = await db.executions.saveConfig(name, "name: a", { ...snapshot, name });
      const v2 = await db.executions.saveConfig(name, "name: b", { ...snapshot, name });
      await db.executions.saveConfig(`${name}-other`, "x", snapshot);
      expect([v1.version, v2.version]).toEqual([1, 2]);
      expect(v2.parsed).toEqual({ ...snapshot, name });
      expect((await db.executions.getConfig(name))?.source).toBe("name: b");
      expect((await db.executions.getConfig(name, 1))?.source).toBe("name: a");
      expect(await db.executions.getConfig(name, 9)).toBeUndefined();
      expect(await db.executions.getConfig("nope")).toBeUndefined();
      const latest = (await db.executions.listConfigs()).filter((c) => c.name.startsWith(name));
      expect(latest.map((c) => [c.name, c.version])).toEqual([
        [name, 2],
        [`${name}-other`, 1],
      ]);
      await expect(db.executions.getConfig(name, 0)).rejects.toMatchObject({ code: "invalid_argument" });
    });

    it("gives concurrent saves of one name distinct versions", async () => {
      const name = `race-${uuidv7().slice(-8)}`;
      const saved = await Promise.all(
        [1, 2, 3, 4].map((i) => db.executions.saveConfig(name, `v: ${i}`, snapshot)),
      );
      expect(saved.map((c) => c.version).sort()).toEqual([1, 2, 3, 4]);
    });

    it("creates, gets, lists and finishes executions", async () => {
      const configName = `exec-${uuidv7().slice(-8)}`;
      const parent = await db.executions.createExecution({
        id: uuidv7(),
        configName,
        configVersion: 1,
        configSnapshot: snapshot,
        input: { doc: "a" },
      });
      expect(parent).toMatchObject({
        status: "running",
        configName,
        input: { doc: "a" },
        finishedAt: null,
        counters: {},
      });
      const child = await db.executions.createExecution({
        id: uuidv7(),
        configName,
        configVersion: null,
        configSnapshot: snapshot,
        input: null,
        parentExecutionId: parent.id,
        replayFromRoute: "parse",
      });
      expect(await db.executions.getExecution(child.id)).toMatchObject({
        parentExecutionId: parent.id,
        replayFromRoute: "parse",
        configSnapshot: snapshot,
        input: null,
      });
      expect(await db.executions.getExecution(uuidv7())).toBeUndefined();

      expect(
        await db.executions.finishExecution(parent.id, "failed", { error: "boom", counters: { parse: 3 } }),
      ).toBe(true);
      expect(await db.executions.finishExecution(parent.id, "completed")).toBe(false);
      expect(await db.executions.finishExecution(uuidv7(), "completed")).toBe(false);
      const finished = await db.executions.getExecution(parent.id);
      expect(finished).toMatchObject({ status: "failed", error: "boom", counters: { parse: 3 } });
      expect(finished?.finishedAt).toMatch(/^\d{4}-\d\d-\d\dT/);

      const all = await db.executions.listExecutions({ configName });
      expect(all.total).toBe(2);
      expect(all.items.map((e) => e.id)).toEqual([child.id, parent.id]);
      const page = await db.executions.listExecutions({ configName, offset: 1, limit: 1 });
      expect(page).toMatchObject({ total: 2, items: [{ id: parent.id }] });
      expect(
        (await db.executions.listExecutions({ configName, status: "running" })).items.map((e) => e.id),
      ).toEqual([child.id]);
      expect((await db.executions.listExecutions({ parentExecutionId: parent.id })).total).toBe(1);
    });

    it("sorts executions by start, duration and status and limits them to a start range", async () => {
      const configName = `sort-${uuidv7().slice(-8)}`;
      // Each step waits for the clock to move on, so start and end times are distinct.
      const tick = async () => {
        const from = Date.now();
        while (Date.now() < from + 2) await new Promise<void>((resolve) => setImmediate(resolve));
      };
      const create = async () => {
        await tick();
        return db.executions.createExecution({
          id: uuidv7(),
          configName,
          configVersion: 1,
          configSnapshot: snapshot,
          input: null,
        });
      };
      const run = await create();
      const a = await create();
      const b = await create();
      const c = await create();
      // Durations: c finishes first (shortest), a last; run, the oldest, keeps running (longest).
      await tick();
      await db.executions.finishExecution(c.id, "completed");
      await tick();
      await db.executions.finishExecution(b.id, "failed", { error: "boom" });
      await tick();
      await db.executions.finishExecution(a.id, "completed");
      const ids = async (q: Parameters<typeof db.executions.listExecutions>[0]) =>
        (await db.executions.listExecutions({ configName, ...q })).items.map((e) => e.id);

      expect(await ids({})).toEqual([c.id, b.id, a.id, run.id]);
      expect(await ids({ sort: "started", direction: "asc" })).toEqual([run.id, a.id, b.id, c.id]);
      expect(await ids({ sort: "duration", direction: "desc" })).toEqual([run.id, a.id, b.id, c.id]);
      expect(await ids({ sort: "duration", direction: "asc" })).toEqual([c.id, b.id, a.id, run.id]);
      // running, failed, cancelled, completed; newest first within a status.
      expect(await ids({ sort: "status", direction: "asc" })).toEqual([run.id, b.id, c.id, a.id]);
      expect(await ids({ sort: "status", direction: "desc" })).toEqual([c.id, a.id, b.id, run.id]);
      expect(await ids({ sort: "duration", direction: "asc", offset: 1, limit: 2 })).toEqual([b.id, a.id]);

      // From is inclusive, to exclusive; the total counts the range.
      expect(await ids({ startedFrom: b.createdAt })).toEqual([c.id, b.id]);
      expect(await ids({ startedTo: b.createdAt })).toEqual([a.id, run.id]);
      const range = await db.executions.listExecutions({
        configName,
        startedFrom: new Date(a.createdAt),
        startedTo: c.createdAt,
        sort: "started",
        direction: "asc",
      });
      expect({ total: range.total, ids: range.items.map((e) => e.id) }).toEqual({
        total: 2,
        ids: [a.id, b.id],
      });
      expect(await ids({ startedFrom: "2000-01-01T00:00:00+02:00", startedTo: run.createdAt })).toEqual([]);

      for (const bad of [
        { startedFrom: "yesterday" },
        { startedTo: "2026-01-01T00:00:00" },
        { sort: "name" as never },
        { direction: "up" as never },
      ]) {
        await expect(db.executions.listExecutions(bad)).rejects.toMatchObject({ code: "invalid_argument" });
      }
    });

    it("rejects malformed ids and arguments without touching SQL", async () => {
      await expect(db.executions.getExecution("not-a-uuid")).rejects.toMatchObject({
        code: "invalid_argument",
        message: expect.stringContaining("is not a UUID"),
      });
      await expect(db.executions.finishExecution("x", "completed")).rejects.toMatchObject({
        code: "invalid_argument",
      });
      await expect(db.executions.listExecutions({ limit: 0 })).rejects.toMatchObject({
        code: "invalid_argument",
      });
      await expect(db.executions.listExecutions({ parentExecutionId: "1" })).rejects.toMatchObject({
        code: "invalid_argument",
      });
      await expect(
        db.executions.createExecution({
          id: "abc",
          configName: "x",
          configVersion: 1,
          configSnapshot: snapshot,
          input: null,
        }),
      ).rejects.toMatchObject({ code: "invalid_argument" });
      await expect(db.lineage.countOpen("'; drop table lineage; --")).rejects.toMatchObject({
        code: "invalid_argument",
      });
      await expect(db.lineage.rows("nope")).rejects.toMatchObject({ code: "invalid_argument" });
      await expect(db.lineage.tree("nope", "m")).rejects.toMatchObject({ code: "invalid_argument" });
      await expect(db.lineage.countsByRoute("nope")).rejects.toMatchObject({ code: "invalid_argument" });
      await expect(db.lineage.routeInputs("nope", "r")).rejects.toMatchObject({ code: "invalid_argument" });
      expect(() => db.lineage.record(row("bad"))).toThrow(/not a UUID/);
      expect(() => db.lineage.update("bad", { status: "completed" })).toThrow(/not a UUID/);
      await expect(db.executions.deleteExecutionsBefore(new Date("nope"))).rejects.toMatchObject({
        code: "invalid_argument",
      });
    });

    it("answers empty for an unknown execution", async () => {
      const id = uuidv7();
      expect(await db.lineage.countOpen(id)).toBe(0);
      expect(await db.lineage.rows(id)).toEqual({ total: 0, items: [] });
      expect(await db.lineage.countsByRoute(id)).toEqual([]);
      expect(await db.lineage.tree(id, "m")).toEqual({ items: [], truncated: false });
      expect(await db.lineage.routeInputs(id, "parse")).toEqual([]);
    });

    it("merges pending→completed in one batch and keeps order across batches", async () => {
      const exec = uuidv7();
      const before = db.lineage.counters().written;
      const merged = row(exec);
      db.lineage.record(merged);
      db.lineage.update(merged.id, {
        status: "completed",
        outputKeys: ["a/b.json"],
        finishedAt: new Date().toISOString(),
      });
      await db.lineage.flush();
      if (database) expect(db.lineage.counters().written - before).toBe(1);

      const later = row(exec, { kind: "message" });
      db.lineage.record(later);
      await db.lineage.flush();
      db.lineage.update(later.id, { status: "processing" });
      await db.lineage.flush();
      db.lineage.update(later.id, {
        status: "failed",
        attempt: 2,
        error: { class: "TypeError", message: "x", retryable: true, fatal: false },
      });
      db.lineage.update(later.id, { status: "completed", finishedAt: new Date().toISOString() });
      await db.lineage.flush();

      const { items } = await db.lineage.rows(exec);
      const byId = new Map(items.map((r) => [r.id, r]));
      expect(byId.get(merged.id)).toMatchObject({
        status: "completed",
        outputKeys: ["a/b.json"],
        adapter: "noop",
      });
      expect(byId.get(later.id)).toMatchObject({ status: "completed", attempt: 2, kind: "message" });
      expect(byId.get(later.id)?.adapter).toBeUndefined();
      expect(db.lineage.counters()).toMatchObject({ lost: 0, queued: 0 });
    });

    it("keeps awkward text and JSON exactly through inserts, upserts and updates", async () => {
      const exec = uuidv7();
      // Array-literal and CSV syntax, SQL NULL look-alikes, escapes and wide characters.
      const awkward = [`a,"b"\nc`, "{x,y}", "NULL", "\\N", "\\.", "", "back\\slash", "naïve ☃ 🚀", "tab\t"];
      const rows = awkward.map((text, i) =>
        row(exec, {
          route: text,
          correlationId: text,
          messageId: `m-${i}-${text}`,
          inputHash: text,
          payload: i === 0 ? text : { text, list: [text, null, 1, true], nested: { [text]: '"' } },
        }),
      );
      // The first write inserts; the same rows written again go through the upsert.
      await db.lineage.registerPending(rows);
      for (const r of rows) db.lineage.record({ ...r, status: "processing" });
      await db.lineage.flush();
      // Then each is changed by a batched update.
      for (const [i, r] of rows.entries()) {
        db.lineage.update(r.id, {
          status: i % 2 === 0 ? "completed" : "failed",
          outputKeys: [awkward[i] as string, "k,2"],
          ...(i % 2 === 0
            ? {}
            : { error: { class: "E", message: awkward[i] as string, retryable: false, fatal: false } }),
          finishedAt: new Date().toISOString(),
        });
      }
      await db.lineage.flush();
      const { items } = await db.lineage.rows(exec, { limit: 100 });
      const byId = new Map(items.map((r) => [r.id, r]));
      for (const [i, r] of rows.entries()) {
        const back = byId.get(r.id);
        expect(back).toMatchObject({
          route: r.route,
          correlationId: r.correlationId,
          messageId: r.messageId,
          inputHash: r.inputHash,
          payload: r.payload as JsonValue,
          outputKeys: [awkward[i], "k,2"],
          status: i % 2 === 0 ? "completed" : "failed",
        });
        if (i % 2 === 1) expect(back?.error?.message).toBe(awkward[i]);
      }
      expect(db.lineage.counters()).toMatchObject({ lost: 0 });
    });
    it("counts open rows for the completion gate, pre-registered children included", async () => {
      const exec = uuidv7();
      const children = [row(exec), row(exec), row(exec, { status: "initiated" })];
      await db.lineage.registerPending(children);
      expect(db.lineage.counters().queued).toBe(0);
      const processing = row(exec, { status: "processing" });
      db.lineage.record(processing);
      db.lineage.record(row(exec, { status: "completed" }));
      expect(await db.lineage.countOpen(exec)).toBe(4);
      for (const child of children) db.lineage.update(child.id, { status: "completed" });
      db.lineage.update(processing.id, { status: "abandoned" });
      expect(await db.lineage.countOpen(exec)).toBe(0);
    });

    it("pages and filters rows, failed rows carry their error", async () => {
      const exec = uuidv7();
      const t = Date.now();
      const at = (i: number) => new Date(t + i).toISOString();
      for (let i = 0; i < 5; i++) db.lineage.record(row(exec, { status: "completed", startedAt: at(i) }));
      const failed = row(exec, {
        route: "store",
        status: "failed",
        startedAt: at(9),
        error: { class: "DeliveryAbandoned", message: "cancelled", retryable: true, fatal: false },
      });
      db.lineage.record(failed);
      db.lineage.record(
        row(exec, { kind: "message", route: "store", status: "completed", startedAt: at(10) }),
      );
      await db.lineage.flush();

      const failedRows = await db.lineage.rows(exec, { status: "failed" });
      expect(failedRows.total).toBe(1);
      expect(failedRows.items[0]).toMatchObject({ id: failed.id, error: failed.error, route: "store" });
      const page = await db.lineage.rows(exec, { route: "parse", offset: 2, limit: 2 });
      expect(page.total).toBe(5);
      expect(page.items.map((r) => r.startedAt)).toEqual([at(2), at(3)]);
      expect((await db.lineage.rows(exec, { kind: "message" })).total).toBe(1);
      await expect(db.lineage.rows(exec, { limit: -1 })).rejects.toMatchObject({ code: "invalid_argument" });

      expect(await db.lineage.countsByRoute(exec)).toEqual([
        { route: "parse", kind: "adapter", status: "completed", count: 5 },
        { route: "store", kind: "adapter", status: "failed", count: 1 },
        { route: "store", kind: "message", status: "completed", count: 1 },
      ]);
    });

    it("walks the tree of one message: ancestors and descendants, not siblings", async () => {
      const exec = uuidv7();
      const mk = (messageId: string, kind: "message" | "adapter", parentId?: string) =>
        row(exec, { messageId, kind, status: "completed", ...(parentId === undefined ? {} : { parentId }) });
      const rootMsg = mk("m0", "message");
      const rootAdapter = mk("m0", "adapter", rootMsg.id);
      const m1 = mk("m1", "message", rootAdapter.id);
      const m2 = mk("m2", "message", rootAdapter.id);
      const m1Adapter = mk("m1", "adapter"); // attached to its message only by message id
      const m3 = mk("m3", "message", m1Adapter.id);
      const m3Adapter = mk("m3", "adapter", m3.id);
      const m2Adapter = mk("m2", "adapter", m2.id);
      const other = uuidv7();
      const foreign = row(other, { messageId: "m1" });
      for (const r of [rootMsg, rootAdapter, m1, m2, m1Adapter, m3, m3Adapter, m2Adapter, foreign])
        db.lineage.record(r);
      await db.lineage.flush();

      const tree = await db.lineage.tree(exec, "m1");
      expect(tree.truncated).toBe(false);
      const ids = tree.items.map((r) => r.id).sort();
      expect(ids).toEqual([rootMsg.id, rootAdapter.id, m1.id, m1Adapter.id, m3.id, m3Adapter.id].sort());
      expect((await db.lineage.tree(exec, "m0")).items.length).toBe(8);
      expect(await db.lineage.tree(exec, "unknown")).toEqual({ items: [], truncated: false });
    });

    it("bounds the tree of a large execution: ancestors complete, descendants breadth-first to the limit", async () => {
      // A root message fanning out to 100 child messages, each fanning out to 99 more: 20,002 rows,
      // a message row and an adapter row (child of the message row) per message.
      const exec = uuidv7();
      const message = (messageId: string, parentId?: string) => {
        const m = row(exec, {
          messageId,
          kind: "message",
          status: "completed",
          ...(parentId === undefined ? {} : { parentId }),
        });
        return [m, row(exec, { messageId, status: "completed", parentId: m.id })] as const;
      };
      const root = message("root");
      const children: (readonly [LineageRow, LineageRow])[] = [];
      let leaf = root;
      let written = 0;
      const write = (pair: readonly [LineageRow, LineageRow]) => {
        for (const r of pair) db.lineage.record(r);
        written += 2;
      };
      write(root);
      for (let c = 0; c < 100; c++) {
        const child = message(`c${c}`, root[1].id);
        children.push(child);
        write(child);
        for (let g = 0; g < 99; g++) {
          leaf = message(`c${c}-${g}`, child[1].id);
          write(leaf);
        }
        await db.lineage.roomFor?.(5000);
      }
      await db.lineage.flush();
      expect(written).toBe(20_002);
      const idsOf = (rows: readonly LineageRow[]) => rows.map((r) => r.id);

      const first = await db.lineage.tree(exec, "root", { limit: 1000 });
      expect(first.truncated).toBe(true);
      expect(first.items).toHaveLength(1000);
      expect(new Set(idsOf(first.items)).size).toBe(1000);
      // Breadth-first: the root and every child message (with its adapter row) come before any
      // grandchild.
      expect(idsOf(first.items)).toEqual(expect.arrayContaining(idsOf([...root, ...children.flat()])));

      const byDefault = await db.lineage.tree(exec, "root");
      expect(byDefault.truncated).toBe(true);
      expect(byDefault.items).toHaveLength(DEFAULT_LINEAGE_TREE_LIMIT);

      const whole = await db.lineage.tree(exec, "root", { limit: 30_000 });
      expect(whole.truncated).toBe(false);
      expect(whole.items).toHaveLength(20_002);

      // A leaf's ancestors are always complete, even beyond the limit.
      const ofLeaf = await db.lineage.tree(exec, leaf[0].messageId, { limit: 1 });
      expect(ofLeaf.truncated).toBe(false);
      expect(idsOf(ofLeaf.items).sort()).toEqual(idsOf([...root, ...(children[99] ?? []), ...leaf]).sort());

      // A child: its own 2 rows and the root's 2, then 198 rows of descendants.
      const child = children[0]?.[0].messageId ?? "";
      expect(await db.lineage.tree(exec, child, { limit: 202 })).toMatchObject({ truncated: false });
      expect((await db.lineage.tree(exec, child, { limit: 202 })).items).toHaveLength(202);
      const cut = await db.lineage.tree(exec, child, { limit: 201 });
      expect(cut.truncated).toBe(true);
      expect(cut.items).toHaveLength(201);
      expect(idsOf(cut.items)).toEqual(expect.arrayContaining(idsOf([...root, ...(children[0] ?? [])])));
      const tiny = await db.lineage.tree(exec, child, { limit: 4 });
      expect(tiny).toMatchObject({ truncated: true });
      expect(tiny.items).toHaveLength(4);

      for (const limit of [0, -1, 1.5, Number.NaN]) {
        await expect(db.lineage.tree(exec, "root", { limit })).rejects.toMatchObject({
          code: "invalid_argument",
        });
      }
    });

    it("stores rows holding NUL characters with them escaped and flagged, instead of losing them", async () => {
      // PostgreSQL (and PGlite) refuse U+0000 in text and jsonb; the rows must still be stored.
      const exec = uuidv7();
      const lostBefore = db.lineage.counters().lost;
      const message = row(exec, {
        kind: "message",
        correlationId: "c\u00001",
        payload: { text: "a\u0000b", "key\u0000": ["\u0000", 1], plain: "no nul" },
      });
      const adapter = row(exec, { messageId: message.messageId, adapterIndex: 0 });
      const clean = row(exec, { messageId: message.messageId, adapterIndex: 1 });
      const registered = row(exec, { kind: "message", payload: "x\u0000" });
      for (const r of [message, adapter, clean]) db.lineage.record(r);
      await db.lineage.registerPending([registered]);
      await db.lineage.flush();
      // An update of a row already stored: its error carries a NUL.
      db.lineage.update(adapter.id, {
        status: "failed",
        error: { class: "AdapterError", message: "bad \u0000 byte", retryable: false, fatal: false },
        outputKeys: ["k\u0000"],
        finishedAt: new Date().toISOString(),
      });
      await db.lineage.flush();
      expect(db.lineage.counters().lost).toBe(lostBefore);

      const stored = new Map((await db.lineage.rows(exec, { limit: 100 })).items.map((r) => [r.id, r]));
      expect(stored.size).toBe(4);
      const nul = database ? "\\u0000" : "\u0000";
      expect(stored.get(message.id)).toMatchObject({
        correlationId: `c${nul}1`,
        payload: { text: `a${nul}b`, [`key${nul}`]: [nul, 1], plain: "no nul" },
      });
      expect(stored.get(registered.id)?.payload).toBe(`x${nul}`);
      expect(stored.get(adapter.id)).toMatchObject({
        status: "failed",
        error: { class: "AdapterError", message: `bad ${nul} byte` },
        outputKeys: [`k${nul}`],
      });
      expect(stored.get(clean.id)?.sanitised).toBeUndefined();
      if (database) {
        expect(stored.get(message.id)?.sanitised).toEqual(["correlation_id", "payload"]);
        expect(stored.get(registered.id)?.sanitised).toEqual(["payload"]);
        expect(stored.get(adapter.id)?.sanitised).toEqual(["error", "output_keys"]);
      } else {
        // The in-memory store holds any string as it is: nothing to escape.
        for (const r of stored.values()) expect(r.sanitised).toBeUndefined();
      }
    });

    it("walks up from a leaf message to the root across several routes, as the engine links rows", async () => {
      // The engine's shapes: a message row's parent is the last adapter row of the message it came
      // from; the first adapter row of a message has no parent, the next ones the previous one.
      const exec = uuidv7();
      const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
      let clock = 0;
      const message = (route: string, parentId?: string) => {
        const id = uuidv7();
        return row(exec, {
          id,
          messageId: id,
          kind: "message",
          route,
          status: "completed",
          startedAt: at(clock++),
          ...(parentId === undefined ? {} : { parentId }),
        });
      };
      const adapter = (of: LineageRow, index: number, parentId?: string) =>
        row(exec, {
          messageId: of.messageId,
          route: of.route,
          adapterIndex: index,
          status: "completed",
          startedAt: at(clock++),
          ...(parentId === undefined ? {} : { parentId }),
        });
      const root = message("discover");
      const root0 = adapter(root, 0);
      const root1 = adapter(root, 1, root0.id);
      const file = message("split", root1.id);
      const file0 = adapter(file, 0);
      const otherFile = message("split", root1.id);
      const otherFile0 = adapter(otherFile, 0);
      const section = message("enrich", file0.id);
      const section0 = adapter(section, 0);
      const section1 = adapter(section, 1, section0.id);
      const batch = message("batch", section1.id);
      const batch0 = adapter(batch, 0);
      const written = message("write", batch0.id);
      const written0 = adapter(written, 0);
      const all = [
        root,
        root0,
        root1,
        file,
        file0,
        otherFile,
        otherFile0,
        section,
        section0,
        section1,
        batch,
        batch0,
        written,
        written0,
      ];
      for (const r of all) db.lineage.record(r);
      await db.lineage.flush();

      const ids = async (messageId: string) =>
        (await db.lineage.tree(exec, messageId)).items.map((r) => r.id).sort();
      const ancestors = [root, root0, root1, file, file0, section, section0, section1];
      expect(await ids(batch.messageId)).toEqual(
        [...ancestors, batch, batch0, written, written0].map((r) => r.id).sort(),
      );
      expect(await ids(written.messageId)).toEqual(
        [...ancestors, batch, batch0, written, written0].map((r) => r.id).sort(),
      );
      expect(await ids(file.messageId)).toEqual(
        [root, root0, root1, file, file0, section, section0, section1, batch, batch0, written, written0]
          .map((r) => r.id)
          .sort(),
      );
      expect(await ids(root.messageId)).toEqual(all.map((r) => r.id).sort());
    });

    it("returns the recorded inputs of a route for replay", async () => {
      const exec = uuidv7();
      const t = Date.now();
      const msg = (messageId: string, payload: JsonValue, i: number, route = "parse") =>
        row(exec, {
          kind: "message",
          route,
          messageId,
          correlationId: `c-${messageId}`,
          payload,
          startedAt: new Date(t + i).toISOString(),
        });
      db.lineage.record(msg("b", { n: 2 }, 1));
      db.lineage.record(msg("a", { n: 1 }, 0));
      db.lineage.record(msg("a", { n: 1 }, 5)); // a redelivery: the first recording wins
      db.lineage.record(msg("c", ["x", 3, null], 2));
      db.lineage.record(msg("d", { n: 4 }, 3, "store"));
      db.lineage.record(row(exec, { messageId: "a", payload: { ignored: true } }));
      await db.lineage.flush();
      expect(await db.lineage.routeInputs(exec, "parse")).toEqual([
        { messageId: "a", correlationId: "c-a", payload: { n: 1 } },
        { messageId: "b", correlationId: "c-b", payload: { n: 2 } },
        { messageId: "c", correlationId: "c-c", payload: ["x", 3, null] },
      ]);
      expect((await db.lineage.routeInputs(exec, "parse", ["c", "zz"])).map((i) => i.messageId)).toEqual([
        "c",
      ]);
      expect(await db.lineage.routeInputs(exec, "parse", [])).toEqual([]);
      expect(await db.lineage.routeInputs(exec, "nowhere")).toEqual([]);
    });

    it("reads the committed status of one message for duplicate detection", async () => {
      const exec = uuidv7();
      const status = db.lineage.messageStatus!.bind(db.lineage);
      expect(await status(exec, "nobody")).toBeUndefined();
      const first = row(exec, { kind: "message", messageId: "m", attempt: 1, status: "failed" });
      const retry = row(exec, { kind: "message", messageId: "m", attempt: 2, status: "completed" });
      db.lineage.record(first);
      db.lineage.record(retry);
      db.lineage.record(row(exec, { kind: "adapter", messageId: "m", attempt: 3, status: "pending" }));
      await db.lineage.flush();
      // The furthest attempt of the message row wins; adapter rows of the same message do not count.
      expect(await status(exec, "m")).toEqual({ status: "completed", attempt: 2 });
      expect(await status(exec, "")).toBeUndefined();
      await expect(status("not-a-uuid", "m")).rejects.toMatchObject({ code: "invalid_argument" });
    });

    it.skipIf(!database)(
      "isolates a row the database rejects and counts it lost, keeping the rest",
      async () => {
        const exec = uuidv7();
        const lostBefore = db.lineage.counters().lost;
        const good = [row(exec), row(exec)];
        // PostgreSQL jsonb cannot hold a lone surrogate: the batch fails as a whole, then row by row.
        const bad = row(exec, { kind: "message", payload: { text: "lone\ud800here" } });
        db.lineage.record(good[0]!);
        db.lineage.record(bad);
        db.lineage.record(good[1]!);
        await db.lineage.flush();
        expect(db.lineage.counters().lost - lostBefore).toBe(1);
        expect((await db.lineage.rows(exec)).items.map((r) => r.id).sort()).toEqual(
          good.map((r) => r.id).sort(),
        );
      },
    );

    it("deletes finished executions before a date together with their lineage", async () => {
      const mkExec = () =>
        db.executions.createExecution({
          id: uuidv7(),
          configName: "retention",
          configVersion: 1,
          configSnapshot: snapshot,
          input: null,
        });
      const old = await mkExec();
      const running = await mkExec();
      db.lineage.record(row(old.id, { status: "completed" }));
      db.lineage.record(row(running.id));
      await db.lineage.flush();
      await db.executions.finishExecution(old.id, "completed");
      expect(await db.executions.deleteExecutionsBefore(new Date(Date.now() - 60_000))).toBe(0);
      expect(
        await db.executions.deleteExecutionsBefore(new Date(Date.now() + 60_000)),
      ).toBeGreaterThanOrEqual(1);
      expect(await db.executions.getExecution(old.id)).toBeUndefined();
      expect((await db.lineage.rows(old.id)).total).toBe(0);
      expect(await db.executions.getExecution(running.id)).toBeDefined();
      expect((await db.lineage.rows(running.id)).total).toBe(1);
    });
  });
}
