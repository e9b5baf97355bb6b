// The frame around every signed-in page (Mantine AppShell): a header with the tenant switcher, who is signed
// in, the dark-mode toggle (remembered) and sign-out; a sidebar from the tenant down to one cluster's topics,
// groups, ACLs, schemas, transactions and reports, then the tenant's own pages. Sends a signed-out caller to sign
// in, and a caller without a tenant in the URL to the tenant last used.
import {
  ActionIcon, AppShell, Badge, Burger, Divider, Group, NativeSelect, NavLink as MantineNavLink, ScrollArea, Stack, Text,
  Tooltip, useComputedColorScheme, useMantineColorScheme, Button,
} from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import { useQueryClient } from "@tanstack/react-query";
import { useEffect } from "react";
import { Link, Navigate, NavLink, Outlet, useLocation, useNavigate, useParams } from "react-router";
import { api, ApiError, unwrap } from "../api/client";
import { ErrorText, Loading } from "../components/ui";
import { landingTenant, rememberCluster, rememberedCluster, rememberTenant, useMe, useTenant } from "../session";
import { useClusters } from "./Clusters";
import { MyInvitations } from "./Invitations";

export function Layout() {
  const me = useMe();
  const navigate = useNavigate();
  const location = useLocation();
  const queryClient = useQueryClient();
  const { tenant: slug } = useParams();
  const [opened, { toggle, close }] = useDisclosure();
  useEffect(close, [location.pathname, close]);
  useEffect(() => {
    if (slug && me.data?.tenants.some((t) => t.slug === slug)) rememberTenant(slug, me.data);
  }, [slug, me.data]);
  if (me.error instanceof ApiError && [401, 403].includes(me.error.status)) return <Navigate to="/login" replace />;
  if (me.error) return <ErrorText error={me.error} />;
  // With a tenant in the URL the frame and the page render while /me loads, so the page's own requests start at
  // once (the topics page's first rows came a round trip later when the page waited for /me).
  if (me.isPending && !slug) return <Loading what="your account" />;
  const tenants = me.data?.tenants ?? [];
  if (!slug && me.data) {
    const landing = landingTenant(me.data);
    if (landing) return <Navigate to={`/t/${landing}/clusters`} replace />;
    return <main style={{ padding: "2rem" }}><p>You are not a member of any tenant yet.</p><MyInvitations /></main>;
  }
  if (me.data && !tenants.some((t) => t.slug === slug)) return <main style={{ padding: "2rem" }}><ErrorText error={`No tenant "${slug}" among yours.`} /></main>;
  const signOut = async () => {
    await unwrap(api.POST("/api/v1/auth/logout/")).catch(() => undefined);
    queryClient.clear();
    navigate("/login", { replace: true });
  };
  const role = tenants.find((t) => t.slug === slug)?.role ?? "…";
  return (
    <AppShell header={{ height: 56 }} navbar={{ width: 232, breakpoint: "sm", collapsed: { mobile: !opened } }} padding="md">
      <AppShell.Header>
        <Group h="100%" px="md" gap="sm" wrap="nowrap">
          <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Navigation" />
          <Text component={Link} to={`/t/${slug}/clusters`} fw={700} size="lg" c="inherit" td="none" className="brand">Sluice</Text>
          <NativeSelect aria-label="Tenant" size="xs" value={slug} style={{ maxWidth: 240 }}
            onChange={(e) => navigate(`/t/${e.currentTarget.value}/clusters`)}
            data={tenants.length ? tenants.map((t) => ({ value: t.slug, label: `${t.name} (${t.role})` })) : [{ value: slug ?? "", label: slug ?? "" }]} />
          <Group gap="sm" ml="auto" wrap="nowrap">
            <Text size="sm" visibleFrom="md" truncate maw={220}>{me.data?.display}</Text>
            <Badge variant="light" color="gray" radius="sm" style={{ textTransform: "none" }} data-testid="role">{role}</Badge>
            <ColorSchemeToggle />
            <Button variant="default" size="xs" onClick={signOut}>Sign out</Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar>
        <ScrollArea type="auto" p="xs">
          <Sidebar slug={slug ?? ""} isUser={me.data?.type === "user"} />
        </ScrollArea>
      </AppShell.Navbar>
      <AppShell.Main>
        <div key={location.pathname.split("/").slice(0, 5).join("/")} style={{ minWidth: 0 }}>
          <MyInvitations />
          <Outlet />
        </div>
      </AppShell.Main>
    </AppShell>
  );
}

function ColorSchemeToggle() {
  const { setColorScheme } = useMantineColorScheme();
  const computed = useComputedColorScheme("light", { getInitialValueInEffect: false });
  const dark = computed === "dark";
  return (
    <Tooltip label={dark ? "Light mode" : "Dark mode"}>
      <ActionIcon variant="default" size="lg" aria-label="Dark mode" aria-pressed={dark}
        onClick={() => setColorScheme(dark ? "light" : "dark")}>
        <span aria-hidden>{dark ? "☀" : "☾"}</span>
      </ActionIcon>
    </Tooltip>
  );
}

function Item({ to, label, end }: { to: string; label: string; end?: boolean }) {
  const location = useLocation();
  const active = end ? location.pathname === to : location.pathname === to || location.pathname.startsWith(`${to}/`);
  return <MantineNavLink component={NavLink} to={to} end={end} label={label} active={active} variant="light" py={6} />;
}

const CLUSTER_PAGES: [string, string][] = [
  ["", "Overview"], ["topics", "Topics"], ["consumer-groups", "Consumer groups"], ["acls", "ACLs"], ["schemas", "Schemas"],
  ["transactions", "Transactions"], ["reports", "Reports"],
];

function Sidebar({ slug, isUser }: { slug: string; isUser: boolean }) {
  const { can } = useTenant();
  const { cluster: inUrl } = useParams();
  const navigate = useNavigate();
  const clusters = useClusters(slug);
  const list = clusters.data?.results ?? [];
  const remembered = rememberedCluster(slug);
  const current = inUrl ?? (list.some((c) => c.id === remembered) ? remembered : list.length === 1 ? list[0].id : null);
  useEffect(() => {
    if (inUrl) rememberCluster(slug, inUrl);
  }, [slug, inUrl]);
  const base = `/t/${slug}`;
  return (
    <Stack gap={4}>
      <Text size="xs" fw={700} className="muted" tt="uppercase" px="sm" pt="xs">Cluster</Text>
      {list.length > 0 && (
        <NativeSelect aria-label="Cluster" size="xs" px="sm" value={current ?? ""}
          onChange={(e) => e.currentTarget.value && navigate(`${base}/clusters/${e.currentTarget.value}`)}
          data={[...(current ? [] : [{ value: "", label: "Choose a cluster…" }]), ...list.map((c) => ({ value: c.id, label: c.name }))]} />
      )}
      {current && (
        <nav aria-label="Cluster">
          {CLUSTER_PAGES.map(([page, label]) => (
            <Item key={page} to={`${base}/clusters/${current}${page ? `/${page}` : ""}`} label={label} end={!page} />
          ))}
        </nav>
      )}
      <Divider my="xs" />
      <Text size="xs" fw={700} className="muted" tt="uppercase" px="sm">Tenant</Text>
      <nav aria-label="Tenant">
        <Item to={`${base}/clusters`} label="Clusters" end />
        <Item to={`${base}/reports`} label="Reports" end />
        <Item to={`${base}/members`} label="Members" />
        <Item to={`${base}/service-accounts`} label="Service accounts & API keys" />
        {can("admin") && <Item to={`${base}/audit`} label="Audit log" />}
        {isUser && <Item to={`${base}/account`} label="Your account" />}
      </nav>
    </Stack>
  );
}
