import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter, Route, Routes } from "react-router";
import { MyInvitations } from "./Invitations";

const invitation = {
  id: "8a4e7c1e-5b0e-4a47-9d36-0d7f0e0c2b11", tenant: "acme", tenant_name: "Acme", role: "admin",
  invited_by: "ann", created_at: "2026-01-01T00:00:00Z", expires_at: "2026-01-08T00:00:00Z",
};

function json(body: unknown, status = 200) {
  return new Response(body === null ? null : JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

function page(results: unknown[]) {
  return { count: results.length, next: null, previous: null, results };
}

function mount() {
  render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <MemoryRouter initialEntries={["/"]}>
        <Routes>
          <Route path="/" element={<MyInvitations />} />
          <Route path="/t/:tenant/clusters" element={<p>Clusters of the tenant</p>} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

describe("MyInvitations", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("shows nothing without invitations", async () => {
    const fetch = vi.fn(async () => json(page([])));
    vi.stubGlobal("fetch", fetch);
    mount();
    await vi.waitFor(() => expect(fetch).toHaveBeenCalled());
    expect(screen.queryByRole("region", { name: "Your invitations" })).not.toBeInTheDocument();
  });

  it("accepts an invitation and opens the tenant", async () => {
    const calls: string[] = [];
    vi.stubGlobal("fetch", vi.fn(async (request: Request) => {
      calls.push(`${request.method} ${new URL(request.url).pathname}`);
      if (request.method === "POST") return json({ slug: "acme", name: "Acme", role: "admin", created_at: "2026-01-01T00:00:00Z" });
      return json(page(calls.some((c) => c.startsWith("POST")) ? [] : [invitation]));
    }));
    mount();
    expect(await screen.findByText(/ann invited you to/)).toHaveTextContent("Acme as admin");
    await userEvent.click(screen.getByRole("button", { name: "Accept" }));
    expect(await screen.findByText("Clusters of the tenant")).toBeInTheDocument();
    expect(calls).toContain(`POST /api/v1/invitations/${invitation.id}/accept/`);
  });

  it("declines, and says why when the server refuses", async () => {
    vi.stubGlobal("fetch", vi.fn(async (request: Request) => {
      if (request.method === "POST") return json({ code: "invitation_closed", message: "The invitation is revoked already.", extra: {} }, 409);
      return json(page([invitation]));
    }));
    mount();
    await userEvent.click(await screen.findByRole("button", { name: "Decline" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("The invitation is revoked already.");
  });
});
