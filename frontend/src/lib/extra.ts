// Fields the API adds for the console (issue 31's API half, docs in /api/v1's schema once merged) read without
// trusting that they are there yet: a missing field is undefined and shows as "—", never a crash.

export function num(row: unknown, key: string): number | null | undefined {
  const value = (row as Record<string, unknown> | null | undefined)?.[key];
  return typeof value === "number" ? value : value === null ? null : undefined;
}

export function str(row: unknown, key: string): string | null | undefined {
  const value = (row as Record<string, unknown> | null | undefined)?.[key];
  return typeof value === "string" ? value : value === null ? null : undefined;
}

export function list<T = string>(row: unknown, key: string): T[] | undefined {
  const value = (row as Record<string, unknown> | null | undefined)?.[key];
  return Array.isArray(value) ? (value as T[]) : undefined;
}
