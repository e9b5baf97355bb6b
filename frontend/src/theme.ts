// The console's Mantine theme: one primary colour, compact spacing for dense operator tables, and colour
// variables tuned so every text meets WCAG AA in both schemes (axe-core checks each page in light and dark).
import { createTheme, type CSSVariablesResolver } from "@mantine/core";

export const theme = createTheme({
  primaryColor: "indigo",
  primaryShade: { light: 7, dark: 8 },
  defaultRadius: "md",
  fontFamily: "Inter, system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif",
  fontFamilyMonospace: "ui-monospace, SFMono-Regular, Menlo, Consolas, monospace",
  headings: { sizes: { h1: { fontSize: "1.6rem", lineHeight: "1.3" }, h2: { fontSize: "1.25rem" }, h3: { fontSize: "1.05rem" } } },
  cursorType: "pointer",
});

const TONES = ["blue", "green", "yellow", "red", "gray", "indigo", "orange", "teal", "violet", "cyan", "grape"];

/** Light-variant text (badges, subtle buttons) and dimmed text darker in light / lighter in dark, for contrast. */
export const resolver: CSSVariablesResolver = () => ({
  variables: {},
  light: {
    "--mantine-color-dimmed": "var(--mantine-color-gray-7)",
    "--mantine-color-anchor": "var(--mantine-color-indigo-8)",
    ...Object.fromEntries(TONES.map((c) => [`--mantine-color-${c}-light-color`, `var(--mantine-color-${c}-9)`])),
    "--mantine-color-yellow-light-color": "#6b4d00",
    "--mantine-color-gray-light-color": "var(--mantine-color-gray-8)",
  },
  dark: {
    "--mantine-color-dimmed": "var(--mantine-color-dark-1)",
    "--mantine-color-anchor": "var(--mantine-color-indigo-3)",
    ...Object.fromEntries(TONES.map((c) => [`--mantine-color-${c}-light-color`, `var(--mantine-color-${c}-2)`])),
    "--mantine-color-gray-light-color": "var(--mantine-color-gray-3)",
  },
});
