import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { API_DEFAULTS } from "../api/defaults";
import { CreateTopic } from "./Topics";

function json(body: unknown, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

describe("CreateTopic", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("starts from the API's partition count and sends it", async () => {
    const bodies: unknown[] = [];
    vi.stubGlobal("fetch", vi.fn(async (request: Request) => {
      bodies.push(await request.json());
      return json({ name: "orders", partitions: API_DEFAULTS.topic.partitions }, 201);
    }));
    render(
      <QueryClientProvider client={new QueryClient()}>
        <CreateTopic slug="acme" cluster="c1" />
      </QueryClientProvider>,
    );
    expect(screen.getByLabelText("Partitions")).toHaveValue(6);
    await userEvent.type(screen.getByLabelText("Name"), "orders");
    await userEvent.click(screen.getByRole("button", { name: "Create topic" }));
    await vi.waitFor(() => expect(bodies).toHaveLength(1));
    expect(bodies[0]).toEqual({ name: "orders", partitions: 6, configs: { "cleanup.policy": "delete" } });
  });
});
