// The cluster's Schema Registry (Confluent's REST API under /schema-registry/{kafka_cluster_id}/), reached with the
// console's session cookie; writes carry the CSRF token like the management API's. Not in the OpenAPI schema (it
// is Confluent's API, not ours), so its few answers are typed here.
import { csrfToken, errorFrom } from "./client";

export type SchemaType = "AVRO" | "JSON" | "PROTOBUF";
export const LEVELS = ["BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"] as const;
export type Level = (typeof LEVELS)[number];

export interface SubjectVersion {
  subject: string;
  version: number;
  id: number;
  schemaType?: SchemaType;
  schema: string;
  references?: { name: string; subject: string; version: number }[];
}

/** One registry call; the answer's JSON, or a thrown ApiError with Confluent's message and error_code. */
export async function registry<T>(kafkaId: string, method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/vnd.schemaregistry.v1+json" };
  if (body !== undefined) headers["Content-Type"] = "application/vnd.schemaregistry.v1+json";
  if (!["GET", "HEAD"].includes(method)) headers["X-CSRFToken"] = csrfToken();
  let response: Response;
  try {
    response = await globalThis.fetch(new Request(`${window.location.origin}/schema-registry/${encodeURIComponent(kafkaId)}${path}`, {
      method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
    }));
  } catch {
    throw errorFrom(0, null);
  }
  const text = await response.text();
  let data: unknown = text;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    /* a raw schema text */
  }
  if (!response.ok) throw errorFrom(response.status, data);
  return data as T;
}

export const subjectPath = (subject: string) => `/subjects/${encodeURIComponent(subject)}`;

/** The subject's own compatibility level, or the registry's (``inherited``) when the subject has none (40408). */
export async function subjectLevel(kafkaId: string, subject: string): Promise<{ level: Level; inherited: boolean }> {
  try {
    const own = await registry<{ compatibilityLevel: Level }>(kafkaId, "GET", `/config/${encodeURIComponent(subject)}`);
    return { level: own.compatibilityLevel, inherited: false };
  } catch (error) {
    if ((error as { code?: string }).code !== "40408") throw error;
    const global = await registry<{ compatibilityLevel: Level }>(kafkaId, "GET", "/config");
    return { level: global.compatibilityLevel, inherited: true };
  }
}
