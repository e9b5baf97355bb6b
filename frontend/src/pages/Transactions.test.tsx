import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter, Route, Routes } from "react-router";
import { age, TransactionsPage } from "./Transactions";

function json(body: unknown, status = 200) {
  return new Response(status === 204 ? null : JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

const OPEN = {
  transactional_id: "orders-enricher-1", state: "Ongoing", producer_id: 7, producer_epoch: 3, timeout_ms: 60000,
  start_time_ms: 1, age_ms: 200_000, coordinator: 1, partitions: [{ topic: "orders", partition: 0 }, { topic: "orders", partition: 2 }],
};

function mount(role: string, calls: string[]) {
  let open = [OPEN];
  vi.stubGlobal("fetch", vi.fn(async (request: Request) => {
    calls.push(`${request.method} ${new URL(request.url).pathname}`);
    if (request.url.endsWith("/me/")) return json({ tenants: [{ slug: "acme", name: "Acme", role, created_at: "" }] });
    if (request.method === "POST") { open = []; return json(null, 204); }
    return json(open);
  }));
  render(
    <QueryClientProvider client={new QueryClient()}>
      <MemoryRouter initialEntries={["/t/acme/clusters/c1/transactions"]}>
        <Routes><Route path="/t/:tenant/clusters/:cluster/transactions" element={<TransactionsPage />} /></Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

describe("Transactions", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("says how long a transaction has been open", () => {
    expect([age(null), age(4_000), age(200_000), age(7_500_000)]).toEqual(["—", "4 s", "3 min 20 s", "2 h 5 min"]);
  });

  it("lists open transactions, and an admin aborts one after confirming", async () => {
    const calls: string[] = [];
    mount("admin", calls);
    const row = (await screen.findByText("orders-enricher-1")).closest("tr") as HTMLElement;
    expect(within(row).getByText("orders-0, orders-2")).toBeInTheDocument();
    expect(within(row).getByText("3 min 20 s")).toBeInTheDocument();
    await userEvent.click(within(row).getByRole("button", { name: "Abort" }));
    await userEvent.click(screen.getByRole("button", { name: "Confirm abort" }));
    expect(await screen.findByText("No open transactions.")).toBeInTheDocument();
    expect(calls).toContain("POST /api/v1/tenants/acme/clusters/c1/transactions/orders-enricher-1/abort/");
  });

  it("offers no abort to a viewer", async () => {
    mount("viewer", []);
    const row = (await screen.findByText("orders-enricher-1")).closest("tr") as HTMLElement;
    expect(within(row).queryByRole("button", { name: "Abort" })).toBeNull();
  });
});
