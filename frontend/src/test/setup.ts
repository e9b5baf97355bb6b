import "@testing-library/jest-dom/vitest";
import { createElement, type ReactNode } from "react";

// jsdom lacks what Mantine's components measure with.
if (typeof window !== "undefined") {
window.matchMedia ??= ((query: string) => ({
  matches: false, media: query, onchange: null,
  addListener: () => {}, removeListener: () => {}, addEventListener: () => {}, removeEventListener: () => {}, dispatchEvent: () => false,
})) as unknown as typeof window.matchMedia;
globalThis.ResizeObserver ??= class { observe() {} unobserve() {} disconnect() {} } as unknown as typeof ResizeObserver;
window.HTMLElement.prototype.scrollIntoView ??= () => {};
}

// Every component test renders inside the console's MantineProvider, as the app does.
vi.mock("@testing-library/react", async (original) => {
  const actual = await original<typeof import("@testing-library/react")>();
  const { MantineProvider } = await import("@mantine/core");
  const { theme } = await import("../theme");
  const Wrapper = ({ children }: { children: ReactNode }) => createElement(MantineProvider, { theme, env: "test" }, children);
  return {
    ...actual,
    render: ((ui: Parameters<typeof actual.render>[0], options?: Parameters<typeof actual.render>[1]) => {
      const Inner = options?.wrapper;
      const wrapper = Inner ? ({ children }: { children: ReactNode }) => createElement(Wrapper, null, createElement(Inner, null, children)) : Wrapper;
      return actual.render(ui, { ...options, wrapper });
    }) as unknown as typeof actual.render,
  };
});
