// The Schemas pages' logic without React: checking a draft before it is sent, the request body, what a
// compatibility answer says, and which topics a subject belongs to (TopicNameStrategy). Pure, so tested directly.
import type { SchemaType } from "../api/registry";

export interface Draft {
  schemaType: SchemaType;
  schema: string;
}

/** Why the draft cannot be sent yet, or null. Avro and JSON Schema are JSON documents, so a typo is caught here;
 * the registry checks everything else and says what is wrong. */
export function draftProblem(draft: Draft): string | null {
  const text = draft.schema.trim();
  if (!text) return "Write the schema first.";
  if (draft.schemaType === "PROTOBUF") return /\b(message|enum)\b/.test(text) ? null : "A Protobuf schema declares a message or an enum.";
  try {
    JSON.parse(text);
  } catch (error) {
    return `The schema is not valid JSON: ${(error as Error).message}`;
  }
  return null;
}

/** The registry's request body: ``schemaType`` is left out for Avro, as Confluent's clients do. */
export function draftBody(draft: Draft): { schema: string; schemaType?: SchemaType } {
  return draft.schemaType === "AVRO" ? { schema: draft.schema.trim() } : { schema: draft.schema.trim(), schemaType: draft.schemaType };
}

export type Verdict = { compatible: true } | { compatible: false; reasons: string[] };

/** A compatibility test's answer (``?verbose=true``) as what to show: compatible, or the registry's reasons. */
export function verdictOf(answer: { is_compatible: boolean; messages?: string[] }): Verdict {
  if (answer.is_compatible) return { compatible: true };
  const reasons = (answer.messages ?? []).filter((m) => m.trim());
  return { compatible: false, reasons: reasons.length ? reasons : ["The registry found the draft incompatible."] };
}

/** The topic a subject is named after under TopicNameStrategy (``<topic>-key`` / ``<topic>-value``), with the
 * record part it describes; null for other subject names (RecordNameStrategy and the like). */
export function topicOfSubject(subject: string): { topic: string; part: "key" | "value" } | null {
  const match = /^(.+)-(key|value)$/.exec(subject);
  return match ? { topic: match[1], part: match[2] as "key" | "value" } : null;
}

/** The type a stored version has (Confluent omits ``schemaType`` for Avro). */
export function typeOf(version: { schemaType?: SchemaType }): SchemaType {
  return version.schemaType ?? "AVRO";
}
