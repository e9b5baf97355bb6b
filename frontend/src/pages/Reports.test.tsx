import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter } from "react-router";
import { CreateReport } from "./Reports";

function json(body: unknown, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

function mount() {
  render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <MemoryRouter>
        <CreateReport slug="acme" cluster="c1" />
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

const topics = { count: 1, next: null, previous: null, results: [{ name: "orders" }] };

describe("CreateReport", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("shows each problem at its field and sends nothing", async () => {
    const fetch = vi.fn(async (_request: Request) => json(topics));
    vi.stubGlobal("fetch", fetch);
    mount();
    await userEvent.clear(screen.getByLabelText("Window"));
    await userEvent.type(screen.getByLabelText("Window"), "often");
    await userEvent.click(screen.getByRole("button", { name: "Create report" }));
    expect(await screen.findByText("Choose the topic to read.")).toBeInTheDocument();
    expect(screen.getByText(/^Letters, digits/)).toBeInTheDocument();
    expect(screen.getByText(/Like '1 minute'/)).toBeInTheDocument();
    expect(screen.getByLabelText("Topic")).toHaveAttribute("aria-invalid", "true");
    expect(fetch.mock.calls.every(([request]) => request.method === "GET")).toBe(true);
  });

  it("shows the API's field error where the user typed", async () => {
    const sent: unknown[] = [];
    vi.stubGlobal("fetch", vi.fn(async (request: Request) => {
      if (request.method === "GET") return json(topics);
      sent.push(await request.json());
      return json({ code: "validation_error", message: "params.topic: unknown topic 'nope' in cluster 'demo'",
        extra: { fields: { "params.topic": ["unknown topic 'nope' in cluster 'demo'"] } } }, 400);
    }));
    mount();
    await userEvent.type(screen.getByLabelText("Name"), "keys");
    await userEvent.selectOptions(screen.getByLabelText("Kind"), "top_keys");
    await userEvent.type(screen.getByLabelText("Topic"), "nope");
    await userEvent.click(screen.getByRole("button", { name: "Create report" }));
    const problem = await screen.findByText("unknown topic 'nope' in cluster 'demo'");
    expect(screen.getByLabelText("Topic")).toHaveAttribute("aria-describedby", expect.stringContaining(problem.id));
    expect(sent).toEqual([{ name: "keys", description: "", kind: "top_keys", params: { topic: "nope", limit: 10 }, time_range: null, chart: null, schedule: null }]);
    expect(screen.getAllByRole("alert")).toHaveLength(1); // not repeated under the form
  });
});
