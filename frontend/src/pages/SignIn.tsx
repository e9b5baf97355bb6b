import { zodResolver } from "@hookform/resolvers/zod";
import { useQueryClient } from "@tanstack/react-query";
import { type ReactNode, useState } from "react";
import { useForm } from "react-hook-form";
import { useNavigate } from "react-router";
import { z } from "zod";
import { api, unwrap } from "../api/client";
import { Button, Center, Paper, Stack, TextInput, Title } from "@mantine/core";
import { ErrorText } from "../components/ui";

const schema = z.object({
  username: z.string().min(1, "Enter your username."),
  password: z.string().min(1, "Enter your password."),
});
type Form = z.infer<typeof schema>;

export function SignIn() {
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const [error, setError] = useState<unknown>(null);
  const { register, handleSubmit, formState } = useForm<Form>({ resolver: zodResolver(schema) });
  const submit = handleSubmit(async (form) => {
    setError(null);
    try {
      await unwrap(api.POST("/api/v1/auth/login/", { body: form }));
      queryClient.clear();
      navigate("/", { replace: true });
    } catch (caught) {
      setError(caught);
    }
  });
  return (
    <AuthCard title="Sign in to Sluice">
      <form onSubmit={submit} noValidate>
        <Stack>
          <TextInput label="Username" autoComplete="username" {...register("username")} error={formState.errors.username?.message} />
          <TextInput label="Password" type="password" autoComplete="current-password" {...register("password")} error={formState.errors.password?.message} />
          <ErrorText error={error} />
          <Button type="submit" loading={formState.isSubmitting}>Sign in</Button>
        </Stack>
      </form>
    </AuthCard>
  );
}

/** The centred card of the signed-out pages (sign in, join). */
export function AuthCard({ title, children }: { title: string; children: ReactNode }) {
  return (
    <Center component="main" mih="100vh" p="md">
      <Paper withBorder shadow="sm" p="xl" radius="md" w="100%" maw={400}>
        <Title order={1} size="h2" mb="lg">{title}</Title>
        {children}
      </Paper>
    </Center>
  );
}
