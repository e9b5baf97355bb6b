// Who is signed in (/api/v1/me) and the current tenant from the URL; the role decides what is shown. The tenant
// last used is remembered (the API's ``last_tenant`` where it has it, this browser's storage besides), so sign-in
// lands there rather than on the alphabetically first tenant.
import { useQuery } from "@tanstack/react-query";
import { useParams } from "react-router";
import { api, ApiError, atLeast, csrfToken, type Role, type Schemas, unwrap } from "./api/client";

export function useMe() {
  return useQuery({
    queryKey: ["me"],
    queryFn: () => unwrap(api.GET("/api/v1/me/")),
    retry: (count, error) => !(error instanceof ApiError && [401, 403].includes(error.status)) && count < 2,
    staleTime: 60_000,
  });
}

export function useTenant(): { slug: string; tenant: Schemas["Tenant"] | undefined; role: string | null; can: (needed: Role) => boolean } {
  const { tenant: slug = "" } = useParams();
  const me = useMe();
  const tenant = me.data?.tenants.find((t) => t.slug === slug);
  const role = tenant?.role ?? null;
  return { slug, tenant, role, can: (needed) => atLeast(role, needed) };
}

const LAST_TENANT = "sluice.lastTenant";

/** The tenant to land on after sign-in: the last one used if the caller is still a member of it, else the first. */
export function landingTenant(me: Schemas["Me"], stored: string | null = readStored()): string | undefined {
  const slugs = me.tenants.map((t) => t.slug);
  const server = (me as { last_tenant?: string | null }).last_tenant ?? null;
  for (const candidate of [server, stored]) if (candidate && slugs.includes(candidate)) return candidate;
  return slugs[0];
}

function readStored(): string | null {
  try {
    return localStorage.getItem(LAST_TENANT);
  } catch {
    return null;
  }
}

/** Remember ``slug`` as the tenant last used: in this browser, and on the account when the API takes it. */
export function rememberTenant(slug: string, me: Schemas["Me"] | undefined): void {
  try {
    localStorage.setItem(LAST_TENANT, slug);
  } catch {
    // storage refused (private mode): the API's copy is enough
  }
  const server = (me as { last_tenant?: string | null } | undefined)?.last_tenant;
  if (me && me.type === "user" && "last_tenant" in me && server !== slug) {
    // PATCH /me {last_tenant} (issue 31's API half); best effort, so not through the typed client.
    void fetch("/api/v1/me/", {
      method: "PATCH", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify({ last_tenant: slug }),
    }).catch(() => undefined);
  }
}

const LAST_CLUSTER = "sluice.lastCluster.";

export function rememberedCluster(tenant: string): string | null {
  try {
    return localStorage.getItem(LAST_CLUSTER + tenant);
  } catch {
    return null;
  }
}

export function rememberCluster(tenant: string, cluster: string): void {
  try {
    localStorage.setItem(LAST_CLUSTER + tenant, cluster);
  } catch {
    // not remembered: the sidebar shows the cluster list instead
  }
}
