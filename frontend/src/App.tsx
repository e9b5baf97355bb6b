// Routes. Console pages live under /t/{tenant}/... so they never meet the API's paths (/api, /kafka, /ws,
// /admin, /healthz, and the REST Proxy v2's root paths /topics, /consumers, /brokers).
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { lazy, type ReactNode, Suspense } from "react";
import { createBrowserRouter, RouterProvider } from "react-router";
import { ApiError } from "./api/client";
import { AccountPage } from "./pages/Account";
import { AclsPage } from "./pages/Acls";
import { AuditPage } from "./pages/Audit";
import { ClusterOverview } from "./pages/ClusterOverview";
import { ClusterFrame, ClustersPage } from "./pages/Clusters";
import { ConsumerGroupPage, ConsumerGroupsPage } from "./pages/ConsumerGroups";
import { TransactionsPage } from "./pages/Transactions";
import { Join } from "./pages/Join";
import { Layout } from "./pages/Layout";
import { MembersPage } from "./pages/Members";
import { NotFound, RouteError } from "./pages/NotFound";
import { ReportPage } from "./pages/Report";
import { ReportsPage, TenantReportsPage } from "./pages/Reports";
import { ServiceAccountsPage } from "./pages/ServiceAccounts";
import { SignIn } from "./pages/SignIn";
import { TopicPage } from "./pages/Topic";
import { TopicsPage } from "./pages/Topics";
import { Loading } from "./components/ui";

// Pages few visits need are split off the first page's JavaScript (its 300 KB budget).
const SchemasPage = lazy(() => import("./pages/Schemas").then((m) => ({ default: m.SchemasPage })));
const SubjectPage = lazy(() => import("./pages/Schemas").then((m) => ({ default: m.SubjectPage })));
const later = (page: ReactNode) => <Suspense fallback={<Loading what="the page" />}>{page}</Suspense>;

export const routes = [
  { path: "/login", element: <SignIn /> },
  { path: "/join", element: <Join /> },
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
          { path: "consumer-groups", element: <ConsumerGroupsPage /> },
          { path: "consumer-groups/:group", element: <ConsumerGroupPage /> },
          { path: "transactions", element: <TransactionsPage /> },
          { path: "acls", element: <AclsPage /> },
          { path: "schemas", element: later(<SchemasPage />) },
          { path: "schemas/:subject", element: later(<SubjectPage />) },
          { path: "reports", element: <ReportsPage /> },
          { path: "reports/:report", element: <ReportPage /> },
        ] },
        { path: "reports", element: <TenantReportsPage /> },
        { path: "members", element: <MembersPage /> },
        { path: "service-accounts", element: <ServiceAccountsPage /> },
        { path: "audit", element: <AuditPage /> },
        { path: "account", element: <AccountPage /> },
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
    <QueryClientProvider client={queryClient}>
      <RouterProvider router={router} />
    </QueryClientProvider>
  );
}
