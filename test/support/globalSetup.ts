import { ensureTemplateDatabase } from "./templateDatabase.ts";

/** Runs once per `vitest run`: builds the migrated template database the test files clone. */
export default async function globalSetup(): Promise<void> {
  await ensureTemplateDatabase();
}
