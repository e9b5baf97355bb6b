import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { MemoryRouter, Route, Routes } from "react-router";
import { SchemasPage, SubjectPage } from "./Schemas";

function json(body: unknown, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
}

const V1 = JSON.stringify({ type: "record", name: "User", fields: [{ name: "name", type: "string" }] });
const V2 = JSON.stringify({ type: "record", name: "User", fields: [{ name: "name", type: "string" }, { name: "age", type: "int", default: 0 }] });

/** A registry with users-value at versions 1 and 2 and no subject-level config, behind a stubbed fetch. */
function mount(role: string, at: string, calls: string[] = []) {
  vi.stubGlobal("fetch", vi.fn(async (request: Request) => {
    const url = new URL(request.url);
    const path = url.pathname.replace("/schema-registry/skc-1", "");
    calls.push(`${request.method} ${url.pathname}${url.search}`);
    if (url.pathname.endsWith("/me/")) return json({ tenants: [{ slug: "acme", name: "Acme", role, created_at: "" }] });
    if (url.pathname.endsWith("/clusters/c1/")) return json({ name: "c1", kafka_cluster_id: "skc-1", status: {} });
    if (url.pathname.includes("/topics/")) return json({ count: 1, results: [{ name: "users" }] });
    if (path === "/subjects") return json(["users-value"]);
    if (path === "/subjects/users-value/versions") return json([1, 2]);
    if (path === "/subjects/users-value/versions/latest") return json({ subject: "users-value", version: 2, id: 2, schema: V2 });
    const one = /^\/subjects\/users-value\/versions\/(\d)$/.exec(path);
    if (one) return json({ subject: "users-value", version: Number(one[1]), id: Number(one[1]), schema: one[1] === "1" ? V1 : V2 });
    if (path === "/config/users-value" && request.method === "GET") return json({ error_code: 40408, message: "not configured" }, 404);
    if (path === "/config") return json({ compatibilityLevel: "BACKWARD" });
    if (path.startsWith("/compatibility/")) return json({ is_compatible: false, messages: ["READER_FIELD_MISSING_DEFAULT_VALUE: email"] });
    return json({ error_code: 404, message: "HTTP 404 Not Found" }, 404);
  }));
  render(
    <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
      <MemoryRouter initialEntries={[at]}>
        <Routes>
          <Route path="/t/:tenant/clusters/:cluster/schemas" element={<SchemasPage />} />
          <Route path="/t/:tenant/clusters/:cluster/schemas/:subject" element={<SubjectPage />} />
        </Routes>
      </MemoryRouter>
    </QueryClientProvider>,
  );
}

describe("Schemas", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("lists subjects with their latest version, id and compatibility", async () => {
    mount("viewer", "/t/acme/clusters/c1/schemas");
    await screen.findByText("BACKWARD");
    const row = screen.getByRole("link", { name: "users-value" }).closest("tr") as HTMLElement;
    expect(within(row).getByText("BACKWARD")).toBeInTheDocument();
    expect(within(row).getByText("AVRO")).toBeInTheDocument();
    expect(within(row).getByText("(registry default)")).toBeInTheDocument();
  });

  it("shows the diff, the topic, and reasons for an incompatible draft", async () => {
    const calls: string[] = [];
    mount("member", "/t/acme/clusters/c1/schemas/users-value", calls);
    expect(await screen.findByTestId("diff-stats")).toHaveTextContent(/[1-9]\d* added/);
    expect(await screen.findByRole("link", { name: "users" })).toBeInTheDocument();
    await userEvent.click(screen.getByRole("button", { name: "Check compatibility" }));
    expect(await screen.findByTestId("incompatible")).toHaveTextContent("READER_FIELD_MISSING_DEFAULT_VALUE: email");
    expect(calls).toContain("POST /schema-registry/skc-1/compatibility/subjects/users-value/versions/latest?verbose=true");
    expect(screen.queryByRole("combobox", { name: "Compatibility level" })).toBeNull(); // admin only
  });

  it("gives a viewer no writes, saying why", async () => {
    mount("viewer", "/t/acme/clusters/c1/schemas/users-value");
    expect(await screen.findByRole("button", { name: "Register" })).toBeDisabled();
    expect(screen.getByRole("button", { name: "Check compatibility" })).toBeDisabled();
    expect(screen.getAllByText(/can read schemas only/).length).toBeGreaterThan(0);
    expect(screen.getByText("Only an admin changes the compatibility level.")).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Delete version 1" })).toBeDisabled();
  });

  it("keeps the draft and says what is wrong with it", async () => {
    mount("member", "/t/acme/clusters/c1/schemas/users-value");
    const schema = await screen.findByRole("textbox", { name: "Schema" });
    await userEvent.clear(schema);
    await userEvent.type(schema, "{{not json");
    await userEvent.click(screen.getByRole("button", { name: "Register" }));
    expect(await screen.findByText(/The schema is not valid JSON/)).toBeInTheDocument();
    expect(screen.getByRole("textbox", { name: "Schema" })).toHaveValue("{not json");
  });

  it("lets an admin change the compatibility level", async () => {
    const calls: string[] = [];
    mount("admin", "/t/acme/clusters/c1/schemas/users-value", calls);
    const select = await screen.findByRole("combobox", { name: "Compatibility level" });
    await userEvent.selectOptions(select, "FULL");
    await userEvent.click(screen.getByRole("button", { name: "Change compatibility" }));
    await vi.waitFor(() => expect(calls).toContain("PUT /schema-registry/skc-1/config/users-value"));
  });
});
