import { Anchor, Stack, Text, Title } from "@mantine/core";
import { Link, useRouteError } from "react-router";

export function NotFound() {
  return (
    <Stack gap="sm">
      <Title order={1}>Page not found</Title>
      <Anchor component={Link} to="/">Back to your clusters</Anchor>
    </Stack>
  );
}

/** What a page that failed to render shows, instead of a blank screen. */
export function RouteError() {
  const error = useRouteError();
  return (
    <Stack component="main" gap="sm" p="xl">
      <Title order={1}>Something went wrong on this page</Title>
      <Text role="alert" className="error">{error instanceof Error ? error.message : String(error)}</Text>
      <Anchor component={Link} to="/">Back to your clusters</Anchor>
    </Stack>
  );
}
