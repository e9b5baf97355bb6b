// An invitation's one-time link (/join#<secret>): someone without an account chooses a username and password,
// which makes their account with the invited address and joins the tenant. The secret stays in the URL's
// fragment, so it never reaches a server log or a Referer header.
import { zodResolver } from "@hookform/resolvers/zod";
import { useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { useForm } from "react-hook-form";
import { Link, useLocation, useNavigate } from "react-router";
import { z } from "zod";
import { api, unwrap } from "../api/client";
import { Anchor, Button, Stack, Text, TextInput } from "@mantine/core";
import { ErrorText } from "../components/ui";
import { AuthCard } from "./SignIn";

const schema = z
  .object({
    username: z.string().min(1, "Choose a username."),
    password: z.string().min(1, "Choose a password."),
    confirm: z.string(),
  })
  .refine((form) => form.password === form.confirm, { path: ["confirm"], message: "The passwords differ." });
type Form = z.infer<typeof schema>;

export function Join() {
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const token = useLocation().hash.replace(/^#/, "");
  const [error, setError] = useState<unknown>(null);
  const { register, handleSubmit, formState } = useForm<Form>({ resolver: zodResolver(schema) });
  const submit = handleSubmit(async ({ username, password }) => {
    setError(null);
    try {
      const tenant = await unwrap(api.POST("/api/v1/auth/join/", { body: { token, username, password } }));
      queryClient.clear();
      navigate(`/t/${tenant.slug}/clusters`, { replace: true });
    } catch (caught) {
      setError(caught);
    }
  });
  return (
    <AuthCard title="Join Sluice">
      {!token ? (
        <ErrorText error="This invitation link is incomplete: open the whole link you were sent." />
      ) : (
        <form onSubmit={submit} noValidate>
          <Stack>
            <Text size="sm">You were invited. Choose a username and password for your new account.</Text>
            <TextInput label="Username" autoComplete="username" {...register("username")} error={formState.errors.username?.message} />
            <TextInput label="Password" type="password" autoComplete="new-password" {...register("password")} error={formState.errors.password?.message} />
            <TextInput label="Repeat password" type="password" autoComplete="new-password" {...register("confirm")} error={formState.errors.confirm?.message} />
            <ErrorText error={error} />
            <Button type="submit" loading={formState.isSubmitting}>Create account and join</Button>
          </Stack>
        </form>
      )}
      <Text size="sm" mt="md">
        Have an account with the invited address? <Anchor component={Link} to="/login">Sign in</Anchor> and accept the invitation there.
      </Text>
    </AuthCard>
  );
}
