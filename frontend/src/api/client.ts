// The typed API client: openapi-fetch over the types openapi-typescript generates from api_schema/openapi.yaml
// (src/api/schema.d.ts; `npm run check:api` fails when they are stale). One client serves the control plane
// (/api/v1) and the REST Proxy (/kafka/v3): both are in the schema, both take the session cookie.
import createClient, { type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema";

export type Schemas = components["schemas"];

export function csrfToken(): string {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

// Django's CSRF check applies to session-authenticated writes; the token is the csrftoken cookie the login sets.
const csrf: Middleware = {
  onRequest({ request }) {
    if (!["GET", "HEAD", "OPTIONS"].includes(request.method)) request.headers.set("X-CSRFToken", csrfToken());
    return request;
  },
};

// Same origin as the page; fetch is looked up per call (not captured once) so tests can stand in for the network.
export const api = createClient<paths>({
  baseUrl: window.location.origin,
  credentials: "same-origin",
  fetch: (request) => globalThis.fetch(request),
});
api.use(csrf);

/** An API answer that was not a success, with the sentence to show where the user acted. */
export class ApiError extends Error {
  constructor(
    public readonly status: number,
    message: string,
    public readonly code: string = "",
    public readonly fields: Record<string, string[]> = {},
  ) {
    super(message);
  }
}

/** The words of an error body: the control plane's {code, message, extra.fields} or the REST Proxy's
 * {error_code, message}; field errors are joined so the user sees which input was wrong. */
export function errorFrom(status: number, body: unknown): ApiError {
  const data = (body ?? {}) as { code?: string; message?: string; error_code?: number; extra?: { fields?: Record<string, string[]> } };
  const fields = data.extra?.fields ?? {};
  const details = Object.entries(fields).map(([name, problems]) => `${name}: ${[problems].flat().join(" ")}`);
  let message = data.message || (status === 0 ? "The server could not be reached." : `The server answered ${status}.`);
  if (details.length && !details.every((d) => message.includes(d))) message = `${message} ${details.join("; ")}`;
  return new ApiError(status, message, data.code ?? (data.error_code ? String(data.error_code) : ""), fields);
}

/** openapi-fetch's {data, error, response} as the data, or a thrown ApiError. */
export async function unwrap<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  let result;
  try {
    result = await call;
  } catch {
    throw errorFrom(0, null);
  }
  if (result.error !== undefined || !result.response.ok) throw errorFrom(result.response.status, result.error);
  return result.data as T;
}

export type Role = Schemas["RoleEnum"];
const RANK: Record<string, number> = { viewer: 0, member: 1, admin: 2, owner: 3 };

/** Whether ``role`` is at least ``needed`` (viewer < member < admin < owner); unknown roles can do nothing. */
export function atLeast(role: string | null | undefined, needed: Role): boolean {
  return role != null && role in RANK && RANK[role] >= RANK[needed];
}
