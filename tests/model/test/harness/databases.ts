import { connectPostgres } from "@factflow/lineage";

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
export const RABBITMQ_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";

async function admin(statement: string): Promise<void> {
  const handles = await connectPostgres(DATABASE_URL, { poolSize: 1, lineagePoolSize: 1, writerPoolSize: 1 });
  try {
    await handles.writer.execute(statement, []);
  } finally {
    await handles.close();
  }
}

/** A PostgreSQL database of its own, named `<prefix>_<unique>`; `drop()` removes it and its connections. */
export async function createDatabase(prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  await admin(`create database "${name}"`);
  const url = new URL(DATABASE_URL);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`drop database if exists "${name}" with (force)`) };
}
