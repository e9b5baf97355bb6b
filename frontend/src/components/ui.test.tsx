import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { ConfirmButton, DataTable, ReadyBadge } from "./ui";

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
