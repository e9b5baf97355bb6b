import { atLeast, errorFrom } from "./client";

describe("errorFrom", () => {
  it("joins validation fields into the message", () => {
    const error = errorFrom(400, { code: "invalid", message: "Invalid input.", extra: { fields: { name: ["This field is required."] } } });
    expect(error.message).toBe("Invalid input. name: This field is required.");
    expect(error.fields.name).toEqual(["This field is required."]);
  });
  it("reads the REST Proxy's error body", () => {
    const error = errorFrom(404, { error_code: 40401, message: "Topic not found." });
    expect(error.message).toBe("Topic not found.");
    expect(error.code).toBe("40401");
  });
  it("says when there was no answer", () => {
    expect(errorFrom(0, null).message).toBe("The server could not be reached.");
  });
});

describe("atLeast", () => {
  it("orders roles", () => {
    expect(atLeast("admin", "member")).toBe(true);
    expect(atLeast("viewer", "member")).toBe(false);
    expect(atLeast(null, "viewer")).toBe(false);
    expect(atLeast("stranger", "viewer")).toBe(false);
  });
});
