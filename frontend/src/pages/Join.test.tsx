import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter, Route, Routes } from "react-router";
import { Join } from "./Join";

function mount(at: string) {
  render(
    <QueryClientProvider client={new QueryClient()}>
      <MemoryRouter initialEntries={[at]}>
        <Routes>
          <Route path="/join" element={<Join />} />
          <Route path="/t/:tenant/clusters" element={<p>clusters page</p>} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

describe("Join", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("says so when the link has no secret", () => {
    mount("/join");
    expect(screen.getByRole("alert")).toHaveTextContent("This invitation link is incomplete");
  });

  it("sends the secret with the chosen username and password, then opens the tenant", async () => {
    const fetch = vi.fn(async (_request: Request) => new Response(JSON.stringify({ slug: "acme", name: "Acme", role: "viewer", created_at: "" }), {
      status: 201, headers: { "Content-Type": "application/json" },
    }));
    vi.stubGlobal("fetch", fetch);
    mount("/join#s3cret");
    await userEvent.type(screen.getByLabelText("Username"), "ann");
    await userEvent.type(screen.getByLabelText("Password"), "a-long-passphrase");
    await userEvent.type(screen.getByLabelText("Repeat password"), "a-long-passphrase");
    await userEvent.click(screen.getByRole("button", { name: "Create account and join" }));
    expect(await screen.findByText("clusters page")).toBeInTheDocument();
    const sent = fetch.mock.calls[0][0];
    expect(await sent.json()).toEqual({ token: "s3cret", username: "ann", password: "a-long-passphrase" });
  });
});
