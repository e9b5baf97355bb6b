// Routes. Console pages live under /t/{tenant}/... so they never meet the API's paths (/api, /kafka, /ws,
// /admin, /healthz, and the REST Proxy v2's root paths /topics, /consumers, /brokers).
import { MantineProvider } from "@mantine/core";
import { Notifications } from "@mantine/notifications";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { lazy, type ReactNode, Suspense } from "react";
import { createBrowserRouter, RouterProvider } from "react-router";
import { ApiError } from "./api/client";
import { ClusterOverview } from "./pages/ClusterOverview";
import { ClusterFrame, ClustersPage } from "./pages/Clusters";
import { Layout } from "./pages/Layout";
import { NotFound, RouteError } from "./pages/NotFound";
import { SignIn } from "./pages/SignIn";
import { TopicPage } from "./pages/Topic";
import { TopicsPage } from "./pages/Topics";
import { Loading } from "./components/ui";
import { resolver, theme } from "./theme";

// Pages few visits need are split off the first page's JavaScript (its 300 KB budget).
const SchemasPage = lazy(() => import("./pages/Schemas").then((m) => ({ default: m.SchemasPage })));
const SubjectPage = lazy(() => import("./pages/Schemas").then((m) => ({ default: m.SubjectPage })));
const AccountPage = lazy(() => import("./pages/Account").then((m) => ({ default: m.AccountPage })));
const AclsPage = lazy(() => import("./pages/Acls").then((m) => ({ default: m.AclsPage })));
const AuditPage = lazy(() => import("./pages/Audit").then((m) => ({ default: m.AuditPage })));
const ConsumerGroupPage = lazy(() => import("./pages/ConsumerGroups").then((m) => ({ default: m.ConsumerGroupPage })));
const ConsumerGroupsPage = lazy(() => import("./pages/ConsumerGroups").then((m) => ({ default: m.ConsumerGroupsPage })));
const TransactionsPage = lazy(() => import("./pages/Transactions").then((m) => ({ default: m.TransactionsPage })));
const MembersPage = lazy(() => import("./pages/Members").then((m) => ({ default: m.MembersPage })));
const ReportPage = lazy(() => import("./pages/Report").then((m) => ({ default: m.ReportPage })));
const ReportsPage = lazy(() => import("./pages/Reports").then((m) => ({ default: m.ReportsPage })));
const TenantReportsPage = lazy(() => import("./pages/Reports").then((m) => ({ default: m.TenantReportsPage })));
const ServiceAccountsPage = lazy(() => import("./pages/ServiceAccounts").then((m) => ({ default: m.ServiceAccountsPage })));
const Join = lazy(() => import("./pages/Join").then((m) => ({ default: m.Join })));
const later = (page: ReactNode) => <Suspense fallback={<Loading what="the page" />}>{page}</Suspense>;

export const routes = [
  { path: "/login", element: <SignIn /> },
  { path: "/join", element: later(<Join />) },
  {
    path: "/",
    element: <Layout />,
    errorElement: <RouteError />,
    children: [
      { path: "t/:tenant", children: [
        { path: "clusters", element: <ClustersPage /> },
        { path: "clusters/:cluster", element: <ClusterFrame />, children: [
          { index: true, element: <ClusterOverview /> },
          { path: "topics", element: <TopicsPage /> },
          { path: "topics/:topic", element: <TopicPage /> },
          { path: "consumer-groups", element: later(<ConsumerGroupsPage />) },
          { path: "consumer-groups/:group", element: later(<ConsumerGroupPage />) },
          { path: "transactions", element: later(<TransactionsPage />) },
          { path: "acls", element: later(<AclsPage />) },
          { path: "schemas", element: later(<SchemasPage />) },
          { path: "schemas/:subject", element: later(<SubjectPage />) },
          { path: "reports", element: later(<ReportsPage />) },
          { path: "reports/:report", element: later(<ReportPage />) },
        ] },
        { path: "reports", element: later(<TenantReportsPage />) },
        { path: "members", element: later(<MembersPage />) },
        { path: "service-accounts", element: later(<ServiceAccountsPage />) },
        { path: "audit", element: later(<AuditPage />) },
        { path: "account", element: later(<AccountPage />) },
        { path: "*", element: <NotFound /> },
      ] },
      { path: "*", element: <NotFound /> },
    ],
  },
];

const queryClient = new QueryClient({
  defaultOptions: {
    queries: {
      // A refusal will not change on retry; a dropped connection might.
      retry: (count, error) => !(error instanceof ApiError && error.status >= 400 && error.status < 500) && count < 2,
      refetchOnWindowFocus: false,
    },
  },
});

const router = createBrowserRouter(routes);

export function App() {
  return (
    <MantineProvider theme={theme} cssVariablesResolver={resolver} defaultColorScheme="light">
      <Notifications position="top-right" zIndex={1000} />
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </MantineProvider>
  );
}
