// The signed-in user's open invitations (matched on their account's e-mail): accept to join the tenant with the
// invited role, or decline. Nothing is shown when there are none.
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useNavigate } from "react-router";
import { api, unwrap } from "../api/client";
import { Button, Group, Paper, Stack, Text, Title } from "@mantine/core";
import { ErrorText, when } from "../components/ui";

export function MyInvitations() {
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const invitations = useQuery({
    queryKey: ["my-invitations"],
    queryFn: () => unwrap(api.GET("/api/v1/invitations/", { params: { query: { limit: 50 } } })),
    refetchInterval: 60_000,
  });
  const settle = () => queryClient.invalidateQueries({ queryKey: ["my-invitations"] });
  const accept = useMutation({
    mutationFn: (id: string) => unwrap(api.POST("/api/v1/invitations/{id}/accept/", { params: { path: { id } } })),
    onSuccess: async (tenant) => {
      await queryClient.invalidateQueries({ queryKey: ["me"] });
      navigate(`/t/${tenant.slug}/clusters`);
    },
    onSettled: settle,
  });
  const decline = useMutation({
    mutationFn: (id: string) => unwrap(api.POST("/api/v1/invitations/{id}/decline/", { params: { path: { id } } })),
    onSettled: settle,
  });
  if (!invitations.data?.results.length) return <ErrorText error={invitations.error} />;
  return (
    <Paper component="section" aria-label="Your invitations" withBorder p="sm" mb="md">
      <Stack gap="xs">
        <Title order={2} size="h4">Your invitations</Title>
        {invitations.data.results.map((i) => (
          <Group key={i.id} gap="sm" wrap="wrap">
            <Text size="sm">
              {i.invited_by} invited you to <strong>{i.tenant_name || i.tenant}</strong> as {i.role} (until {when(i.expires_at)}).
            </Text>
            <Button size="xs" disabled={accept.isPending} onClick={() => accept.mutate(i.id)}>Accept</Button>
            <Button size="xs" variant="default" disabled={decline.isPending} onClick={() => decline.mutate(i.id)}>Decline</Button>
          </Group>
        ))}
        <ErrorText error={accept.error ?? decline.error} />
      </Stack>
    </Paper>
  );
}
