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
import { ErrorText } from "../components/ui";

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
    <main className="signin">
      <h1>Join Sluice</h1>
      {!token ? (
        <ErrorText error="This invitation link is incomplete: open the whole link you were sent." />
      ) : (
        <form onSubmit={submit} noValidate>
          <p>You were invited. Choose a username and password for your new account.</p>
          <label>
            Username
            <input autoComplete="username" {...register("username")} aria-invalid={!!formState.errors.username} />
          </label>
          <ErrorText error={formState.errors.username?.message} />
          <label>
            Password
            <input type="password" autoComplete="new-password" {...register("password")} aria-invalid={!!formState.errors.password} />
          </label>
          <ErrorText error={formState.errors.password?.message} />
          <label>
            Repeat password
            <input type="password" autoComplete="new-password" {...register("confirm")} aria-invalid={!!formState.errors.confirm} />
          </label>
          <ErrorText error={formState.errors.confirm?.message} />
          <ErrorText error={error} />
          <button type="submit" disabled={formState.isSubmitting}>
            Create account and join
          </button>
        </form>
      )}
      <p>
        Have an account with the invited address? <Link to="/login">Sign in</Link> and accept the invitation there.
      </p>
    </main>
  );
}
