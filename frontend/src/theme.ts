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

/** Light-variant text (badges, subtle buttons) and dimmed text darker in light / lighter in dark, for contrast. */
/** Text on light-variant backgrounds (badges, subtle buttons): dark enough for AA on the tint in light, and a pale
 * shade in dark; dimmed text and links likewise. */
const LIGHT_TEXT: Record<string, string> = {
  green: "#1b5e20", yellow: "#5c4100", red: "#8a1c1c", blue: "#174ea6", gray: "#343a40", indigo: "#2f3a8f",
  orange: "#7a3300", teal: "#0b5e55", violet: "#4b2a99", cyan: "#0b5563", grape: "#6a1b7a",
};

export const resolver: CSSVariablesResolver = () => ({
  variables: {},
  light: {
    "--mantine-color-dimmed": "var(--mantine-color-gray-7)",
    "--mantine-color-error": "#b3261e",
    "--mantine-color-anchor": "var(--mantine-color-indigo-8)",
    ...Object.fromEntries(Object.entries(LIGHT_TEXT).map(([c, v]) => [`--mantine-color-${c}-light-color`, v])),
  },
  dark: {
    "--mantine-color-dimmed": "var(--mantine-color-dark-1)",
    "--mantine-color-error": "#ffb4ab",
    "--mantine-color-anchor": "var(--mantine-color-indigo-3)",
    ...Object.fromEntries(Object.keys(LIGHT_TEXT).map((c) => [`--mantine-color-${c}-light-color`, `var(--mantine-color-${c}-2)`])),
    "--mantine-color-gray-light-color": "var(--mantine-color-gray-3)",
  },
});
