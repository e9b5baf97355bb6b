import { act, render, screen } from "@testing-library/react";
import { Profiler } from "react";
import userEvent from "@testing-library/user-event";
import { conditionTone, ConfirmButton, DataTable, Prose, ReadyBadge } from "./ui";

describe("ConfirmButton", () => {
  it("acts only after the typed confirmation", async () => {
    const confirmed = vi.fn();
    render(<ConfirmButton label="Delete topic" question="Delete orders?" typeToConfirm="orders" onConfirm={confirmed} />);
    await userEvent.click(screen.getByRole("button", { name: "Delete topic" }));
    const confirm = screen.getByRole("button", { name: "Confirm delete topic" });
    expect(confirm).toBeDisabled();
    await userEvent.type(screen.getByLabelText("Confirmation"), "order");
    expect(confirm).toBeDisabled();
    await userEvent.type(screen.getByLabelText("Confirmation"), "s");
    await userEvent.click(confirm);
    expect(confirmed).toHaveBeenCalledTimes(1);
  });

  it("cancel leaves things as they were", async () => {
    const confirmed = vi.fn();
    render(<ConfirmButton label="Revoke" question="Revoke?" onConfirm={confirmed} />);
    await userEvent.click(screen.getByRole("button", { name: "Revoke" }));
    await userEvent.click(screen.getByRole("button", { name: "Cancel" }));
    expect(confirmed).not.toHaveBeenCalled();
    expect(screen.getByRole("button", { name: "Revoke" })).toBeInTheDocument();
  });
});

describe("DataTable", () => {
  const rows = [{ name: "b", n: 2 }, { name: "a", n: 1 }];
  const columns = [{ accessorKey: "name", header: "Name" }, { accessorKey: "n", header: "N" }];

  it("sorts on the client when the server does not", async () => {
    render(<DataTable caption="Things" data={rows} columns={columns} />);
    await userEvent.click(screen.getByRole("button", { name: /Name/ }));
    const cells = screen.getAllByRole("row").slice(1).map((r) => r.textContent);
    expect(cells).toEqual(["a1", "b2"]);
    expect(screen.getByRole("columnheader", { name: /Name/ })).toHaveAttribute("aria-sort", "ascending");
  });

  it("hands sorting to the server when asked", async () => {
    const change = vi.fn();
    render(<DataTable caption="Things" data={rows} columns={columns} sorting={[]} onSortingChange={change} />);
    await userEvent.click(screen.getByRole("button", { name: /N$/ }));
    expect(change).toHaveBeenCalled();
    expect(screen.getAllByRole("row").slice(1).map((r) => r.textContent)).toEqual(["b2", "a1"]);  // as given
  });

  it("renders once while its data loads, not in a loop", async () => {
    // A new [] per render for missing data made the table's row model change on every render, and its page-index
    // reset (a state update queued in a microtask) render again: an endless render loop that froze the tab when a
    // click (a synchronous update) landed while the list was loading.
    let commits = 0;
    const table = () => (
      <Profiler id="table" onRender={() => { commits += 1; }}>
        <DataTable caption="Things" data={undefined} columns={columns} loading />
      </Profiler>
    );
    const { rerender } = render(table());
    await act(() => new Promise((resolve) => setTimeout(resolve, 10)));
    rerender(table());  // the parent renders again (a click's state change, say)
    await act(() => new Promise((resolve) => setTimeout(resolve, 50)));
    expect(commits).toBeLessThanOrEqual(3);
  });

  it("says when it is empty", () => {
    render(<DataTable caption="Things" data={[]} columns={columns} empty="No things." />);
    expect(screen.getByText("No things.")).toBeInTheDocument();
  });
});

describe("ReadyBadge", () => {
  it("shows the Ready condition or its reason", () => {
    const { rerender } = render(<ReadyBadge status={{ conditions: [{ type: "Ready", status: "True" }] }} />);
    expect(screen.getByText("Ready")).toBeInTheDocument();
    rerender(<ReadyBadge status={{ conditions: [{ type: "Ready", status: "False", reason: "BrokersStarting" }] }} />);
    expect(screen.getByText("BrokersStarting")).toBeInTheDocument();
  });
});

describe("DataTable states and paging", () => {
  const columns = [{ accessorKey: "name", header: "Name" }];

  it("shows a loading row, not the empty state, while loading", () => {
    render(<DataTable caption="Things" data={undefined} columns={columns} loading empty="No things." />);
    expect(screen.getByText("Loading things…")).toBeInTheDocument();
    expect(screen.queryByText("No things.")).not.toBeInTheDocument();
  });

  it("pages rows on the client", async () => {
    const rows = Array.from({ length: 25 }, (_, i) => ({ name: `row-${String(i).padStart(2, "0")}` }));
    render(<DataTable caption="Things" data={rows} columns={columns} pageSize={10} />);
    expect(screen.getAllByRole("row")).toHaveLength(11); // header + 10
    expect(screen.getByText("row-00")).toBeInTheDocument();
    await userEvent.click(screen.getByRole("button", { name: "3" }));
    expect(screen.getAllByRole("row")).toHaveLength(6); // header + the last 5
    expect(screen.getByText("row-24")).toBeInTheDocument();
    expect(screen.queryByText("row-00")).not.toBeInTheDocument();
  });
});

describe("conditionTone", () => {
  it("reads a condition by its polarity", () => {
    expect(conditionTone({ type: "Ready", status: "True" })).toBe("ok");
    expect(conditionTone({ type: "Ready", status: "False" })).toBe("warn");
    expect(conditionTone({ type: "Degraded", status: "False" })).toBe("ok"); // healthy: not a yellow badge
    expect(conditionTone({ type: "Degraded", status: "True" })).toBe("bad");
    expect(conditionTone({ type: "Reconciling", status: "True" })).toBe("info");
  });
});

describe("Prose", () => {
  it("shows backticked text as code, without the backticks", () => {
    render(<p data-testid="description"><Prose text="demo key created by `sluice up`" /></p>);
    const description = screen.getByTestId("description");
    expect(description.textContent).toBe("demo key created by sluice up");
    expect(description.querySelector("code")).toHaveTextContent("sluice up");
  });
});
