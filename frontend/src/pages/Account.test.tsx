import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { AccountPage } from "./Account";

function json(status: number, body?: unknown) {
  return new Response(body === undefined ? null : JSON.stringify(body), {
    status, headers: body === undefined ? {} : { "Content-Type": "application/json" },
  });
}

async function fill(current: string, next: string, again: string) {
  await userEvent.type(screen.getByLabelText("Current password"), current);
  await userEvent.type(screen.getByLabelText("New password"), next);
  await userEvent.type(screen.getByLabelText("Repeat new password"), again);
  await userEvent.click(screen.getByRole("button", { name: "Change password" }));
}

describe("AccountPage", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("refuses differing new passwords without calling the API", async () => {
    const fetch = vi.fn();
    vi.stubGlobal("fetch", fetch);
    render(<AccountPage />);
    await fill("old-one", "new-passphrase-1", "new-passphrase-2");
    expect(await screen.findByText("The new passwords differ.")).toBeInTheDocument();
    expect(fetch).not.toHaveBeenCalled();
  });

  it("shows the API's validator message", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => json(400, {
      code: "validation_error", message: "new_password: This password is too common.",
      extra: { fields: { new_password: ["This password is too common."] } },
    })));
    render(<AccountPage />);
    await fill("old-one", "password123", "password123");
    expect(await screen.findByRole("alert")).toHaveTextContent("This password is too common.");
  });

  it("says when the password was changed", async () => {
    const fetch = vi.fn(async () => json(204));
    vi.stubGlobal("fetch", fetch);
    render(<AccountPage />);
    await fill("old-one", "new-passphrase-1", "new-passphrase-1");
    expect(await screen.findByRole("status")).toHaveTextContent("Password changed.");
    expect(fetch).toHaveBeenCalledTimes(1);
  });
});
