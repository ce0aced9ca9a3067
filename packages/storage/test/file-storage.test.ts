import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, utimesSync, writeFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { StorageProtocol } from "@factflow/protocols";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createFileStorage } from "../src/index.js";

describe("file storage", () => {
  let base: string;
  let root: string;
  let storage: StorageProtocol;
  beforeEach(async () => {
    base = await mkdtemp(join(tmpdir(), "factflow-storage-"));
    root = join(base, "root");
    storage = createFileStorage({ root });
  });
  afterEach(async () => {
    await rm(base, { recursive: true, force: true });
  });

  it("puts an artefact with a sidecar and reads both back", async () => {
    const sidecar = await storage.put("e1/parse/out.json", '{"a":1}', {
      contentType: "application/json",
      executionId: "e1",
      route: "parse",
      lineageId: "l1",
    });
    expect(sidecar).toMatchObject({
      key: "e1/parse/out.json",
      contentType: "application/json",
      size: 7,
      sha256: createHash("sha256").update('{"a":1}').digest("hex"),
      executionId: "e1",
      route: "parse",
      lineageId: "l1",
    });
    expect(Date.parse(sidecar.createdAt)).not.toBeNaN();
    expect(await readFile(join(root, "e1/parse/out.json"), "utf8")).toBe('{"a":1}');
    expect(JSON.parse(await readFile(join(root, ".sidecars/e1/parse/out.json.json"), "utf8"))).toEqual(
      sidecar,
    );
    const got = await storage.get("e1/parse/out.json");
    expect(new TextDecoder().decode(got?.data)).toBe('{"a":1}');
    expect(got?.sidecar).toEqual(sidecar);
    expect(await storage.head("e1/parse/out.json")).toEqual(sidecar);
    expect(storage.describe()).toContain(root);
  });

  it("defaults the content type by input kind and overwrites atomically", async () => {
    expect((await storage.put("t", "text")).contentType).toBe("text/plain; charset=utf-8");
    const bin = await storage.put("b", new Uint8Array([1, 2, 3]));
    expect(bin).toMatchObject({ contentType: "application/octet-stream", size: 3 });
    await storage.put("b", new Uint8Array([9]));
    expect([...((await storage.get("b"))?.data ?? [])]).toEqual([9]);
    expect((await readdir(root)).filter((n) => n.includes("tmp"))).toEqual([]);
  });

  it("answers undefined/false for missing artefacts", async () => {
    expect(await storage.get("nope/x")).toBeUndefined();
    expect(await storage.head("nope")).toBeUndefined();
    expect(await storage.delete("nope")).toBe(false);
    expect(await storage.list("nope/")).toEqual([]);
  });

  it("lists by prefix, sorted by key, and deletes", async () => {
    for (const key of ["e2/b", "e1/z", "e1/a/x", "e1b/c"]) await storage.put(key, key);
    expect((await storage.list("e1/")).map((s) => s.key)).toEqual(["e1/a/x", "e1/z"]);
    expect((await storage.list("e1")).map((s) => s.key)).toEqual(["e1/a/x", "e1/z", "e1b/c"]);
    expect((await storage.list()).length).toBe(4);
    expect(await storage.delete("e1/z")).toBe(true);
    expect(await storage.get("e1/z")).toBeUndefined();
    expect((await storage.list("e1/")).map((s) => s.key)).toEqual(["e1/a/x"]);
  });

  it("rejects invalid keys on every operation", async () => {
    for (const op of [
      () => storage.put("../x", "a"),
      () => storage.get("/etc/passwd"),
      () => storage.head("a%2F..%2Fb"),
      () => storage.delete("a//b"),
      () => storage.list("../"),
    ]) {
      await expect(op()).rejects.toMatchObject({ code: "storage_key_invalid" });
    }
  });

  it("refuses to follow symlinks out of the root", async () => {
    const outside = join(base, "outside");
    await mkdir(outside);
    await writeFile(join(outside, "secret"), "s");
    await mkdir(root, { recursive: true });
    await symlink(outside, join(root, "link"));
    await expect(storage.put("link/new/x", "a")).rejects.toMatchObject({
      code: "storage_key_invalid",
      message: expect.stringContaining("outside the storage root"),
    });
    expect(await readdir(outside)).toEqual(["secret"]);
    expect(await storage.get("link/secret")).toBeUndefined();
    // A directory swapped for a symlink after its artefact was written is refused on read.
    await storage.put("dir/secret", "mine");
    await rm(join(root, "dir"), { recursive: true });
    await symlink(outside, join(root, "dir"));
    await expect(storage.get("dir/secret")).rejects.toMatchObject({ code: "storage_key_invalid" });
    await symlink(join(outside, "secret"), join(root, "file-link"));
    await expect(storage.put("file-link", "x")).rejects.toMatchObject({ code: "storage_key_invalid" });
    expect(await readFile(join(outside, "secret"), "utf8")).toBe("s");
  });
});

describe("sweepTemporaryFiles", () => {
  it("removes temp files a crash left behind, and only old ones", async () => {
    const root = mkdtempSync(join(tmpdir(), "factflow-sweep-"));
    const storage = createFileStorage({ root });
    await storage.put("a/kept.txt", "kept");
    mkdirSync(join(root, "a"), { recursive: true });
    mkdirSync(join(root, ".sidecars", "a"), { recursive: true });
    const stale = [
      join(root, "a", ".~tmp-0123-x.txt"),
      join(root, ".sidecars", "a", ".~tmp-4567-x.txt.json"),
    ];
    for (const file of stale) {
      writeFileSync(file, "half");
      const old = new Date(Date.now() - 3_600_000);
      utimesSync(file, old, old);
    }
    const fresh = join(root, "a", ".~tmp-89ab-y.txt");
    writeFileSync(fresh, "in progress");
    expect(await storage.sweepTemporaryFiles(60_000)).toBe(2);
    for (const file of stale) expect(existsSync(file)).toBe(false);
    expect(existsSync(fresh)).toBe(true);
    expect((await storage.get("a/kept.txt"))?.sidecar.key).toBe("a/kept.txt");
  });
});
