import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { useState } from "react";
import { FormDrawer } from "../components/ui";
import { CreateCluster } from "./Clusters";

function json(body: unknown, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

/** The list page's pattern: a button opens the form in a drawer; success closes it. */
function Page() {
  const [open, setOpen] = useState(false);
  return (
    <QueryClientProvider client={new QueryClient()}>
      <button type="button" onClick={() => setOpen(true)}>New cluster</button>
      <FormDrawer opened={open} onClose={() => setOpen(false)} title="Create a cluster">
        <CreateCluster slug="acme" onDone={() => setOpen(false)} />
      </FormDrawer>
    </QueryClientProvider>
  );
}

describe("CreateCluster in a drawer", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("validates inline, sends the form, and closes when created", async () => {
    const bodies: unknown[] = [];
    vi.stubGlobal("fetch", vi.fn(async (request: Request) => {
      bodies.push(await request.json());
      return json({ id: "c1", name: "prod" }, 201);
    }));
    render(<Page />);
    expect(screen.queryByRole("form", { name: "Create a cluster" })).not.toBeInTheDocument();
    await userEvent.click(screen.getByRole("button", { name: "New cluster" }));
    const form = screen.getByRole("form", { name: "Create a cluster" });
    expect(within(screen.getByRole("dialog")).getByRole("form", { name: "Create a cluster" })).toBe(form);
    await userEvent.type(within(form).getByLabelText("Name"), "Bad Name!");
    await userEvent.click(within(form).getByRole("button", { name: "Create cluster" }));
    expect(await within(form).findByRole("alert")).toHaveTextContent("Lower-case letters");
    expect(within(form).getByLabelText("Name")).toHaveAttribute("aria-invalid", "true");
    expect(bodies).toHaveLength(0);
    await userEvent.clear(within(form).getByLabelText("Name"));
    await userEvent.type(within(form).getByLabelText("Name"), "prod");
    await userEvent.selectOptions(within(form).getByLabelText("Plan"), "standard");
    await userEvent.click(within(form).getByRole("button", { name: "Create cluster" }));
    await vi.waitFor(() => expect(screen.queryByRole("form", { name: "Create a cluster" })).not.toBeInTheDocument());
    expect(bodies).toEqual([{ name: "prod", plan: "standard", broker_count: null }]);
  });
});
