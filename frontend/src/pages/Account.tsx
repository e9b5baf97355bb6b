// The signed-in user's own account: changing the password. The API checks the current password and Django's
// password rules; this form only checks that the new password was typed the same twice.
import { zodResolver } from "@hookform/resolvers/zod";
import { useState } from "react";
import { useForm } from "react-hook-form";
import { z } from "zod";
import { api, unwrap } from "../api/client";
import { Button, Group, Stack, Text, TextInput } from "@mantine/core";
import { ErrorText, PageHeader, Section } from "../components/ui";

const schema = z
  .object({
    current_password: z.string().min(1, "Enter your current password."),
    new_password: z.string().min(1, "Enter a new password."),
    confirm: z.string(),
  })
  .refine((form) => form.new_password === form.confirm, { path: ["confirm"], message: "The new passwords differ." });
type Form = z.infer<typeof schema>;

export function AccountPage() {
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState(false);
  const { register, handleSubmit, formState, reset } = useForm<Form>({ resolver: zodResolver(schema) });
  const submit = handleSubmit(async ({ current_password, new_password }) => {
    setError(null);
    setDone(false);
    try {
      await unwrap(api.POST("/api/v1/auth/password/", { body: { current_password, new_password } }));
      reset();
      setDone(true);
    } catch (caught) {
      setError(caught);
    }
  });
  return (
    <>
      <PageHeader title="Your account" />
      <Section title="Change password">
        <form onSubmit={submit} noValidate>
          <Stack maw={420}>
            <TextInput label="Current password" type="password" autoComplete="current-password" {...register("current_password")}
              error={formState.errors.current_password?.message} />
            <TextInput label="New password" type="password" autoComplete="new-password" {...register("new_password")}
              error={formState.errors.new_password?.message} />
            <TextInput label="Repeat new password" type="password" autoComplete="new-password" {...register("confirm")}
              error={formState.errors.confirm?.message} />
            <ErrorText error={error} />
            {done && <Text size="sm" role="status">Password changed. Your other sessions are signed out.</Text>}
            <Group><Button type="submit" loading={formState.isSubmitting}>Change password</Button></Group>
          </Stack>
        </form>
      </Section>
    </>
  );
}
