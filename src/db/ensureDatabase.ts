import pg from "pg";

/** Creates the database named in the URL if it does not exist (connects to the `postgres` database to do so). */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ""));
  if (!name) throw new Error("DATABASE_URL names no database");
  const admin = new URL(databaseUrl);
  admin.pathname = "/postgres";
  const client = new pg.Client({ connectionString: admin.toString() });
  // A lost connection fails the statement running (below); its 'error' event must not crash the process.
  client.on("error", () => undefined);
  await client.connect();
  try {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (found.rowCount) return false;
    try {
      await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
    } catch (error) {
      // Another process created it at the same moment.
      if ((error as { code?: string }).code !== "42P04") throw error;
      return false;
    }
    return true;
  } finally {
    await client.end();
  }
}
