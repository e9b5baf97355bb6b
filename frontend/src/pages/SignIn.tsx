import { zodResolver } from "@hookform/resolvers/zod";
import { useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { useForm } from "react-hook-form";
import { useNavigate } from "react-router";
import { z } from "zod";
import { api, unwrap } from "../api/client";
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
    <main className="signin">
      <h1>Sign in to Sluice</h1>
      <form onSubmit={submit} noValidate>
        <label>
          Username
          <input autoComplete="username" {...register("username")} aria-invalid={!!formState.errors.username} />
        </label>
        <ErrorText error={formState.errors.username?.message} />
        <label>
          Password
          <input type="password" autoComplete="current-password" {...register("password")} aria-invalid={!!formState.errors.password} />
        </label>
        <ErrorText error={formState.errors.password?.message} />
        <ErrorText error={error} />
        <button type="submit" disabled={formState.isSubmitting}>
          Sign in
        </button>
      </form>
    </main>
  );
}
