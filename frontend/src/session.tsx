// Who is signed in (/api/v1/me) and the current tenant from the URL; the role decides what is shown.
import { useQuery } from "@tanstack/react-query";
import { useParams } from "react-router";
import { api, ApiError, atLeast, type Role, type Schemas, unwrap } from "./api/client";

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
