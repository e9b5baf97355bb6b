// The frame around every signed-in page: tenant switcher, navigation, sign-out. Sends a signed-out caller to
// the sign-in page.
import { useQueryClient } from "@tanstack/react-query";
import { Navigate, NavLink, Outlet, useLocation, useNavigate, useParams } from "react-router";
import { api, ApiError, unwrap } from "../api/client";
import { ErrorText, Loading } from "../components/ui";
import { useMe, useTenant } from "../session";
import { MyInvitations } from "./Invitations";

export function Layout() {
  const me = useMe();
  const navigate = useNavigate();
  const location = useLocation();
  const queryClient = useQueryClient();
  const { tenant: slug } = useParams();
  const { role, can } = useTenant();
  if (me.isPending) return <Loading what="your account" />;
  if (me.error instanceof ApiError && [401, 403].includes(me.error.status)) return <Navigate to="/login" replace />;
  if (me.error) return <ErrorText error={me.error} />;
  const tenants = me.data.tenants;
  if (!slug) {
    if (tenants.length) return <Navigate to={`/t/${tenants[0].slug}/clusters`} replace />;
    return <main><p>You are not a member of any tenant yet.</p><MyInvitations /></main>;
  }
  if (!tenants.some((t) => t.slug === slug)) return <main><ErrorText error={`No tenant "${slug}" among yours.`} /></main>;
  const signOut = async () => {
    await unwrap(api.POST("/api/v1/auth/logout/")).catch(() => undefined);
    queryClient.clear();
    navigate("/login", { replace: true });
  };
  const base = `/t/${slug}`;
  return (
    <div className="app">
      <header>
        <a className="brand" href={`${base}/clusters`}>Sluice</a>
        <label>
          Tenant{" "}
          <select aria-label="Tenant"
            value={slug}
            onChange={(e) => navigate(`/t/${e.target.value}/clusters`)}
          >
            {tenants.map((t) => (
              <option key={t.slug} value={t.slug}>
                {t.name} ({t.role})
              </option>
            ))}
          </select>
        </label>
        <span className="who">
          {me.data.display} · <span data-testid="role">{role}</span>
        </span>
        {me.data.type === "user" && <NavLink className="account" to={`${base}/account`}>Your account</NavLink>}
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <nav aria-label="Tenant">
        <NavLink to={`${base}/clusters`}>Clusters</NavLink>
        <NavLink to={`${base}/reports`}>Reports</NavLink>
        <NavLink to={`${base}/members`}>Members</NavLink>
        <NavLink to={`${base}/service-accounts`}>Service accounts &amp; API keys</NavLink>
        {can("admin") && <NavLink to={`${base}/audit`}>Audit log</NavLink>}
      </nav>
      <main key={location.pathname.split("/").slice(0, 5).join("/")}>
        <MyInvitations />
        <Outlet />
      </main>
    </div>
  );
}
