import { Link, useRouteError } from "react-router";

export function NotFound() {
  return (
    <>
      <h1>Page not found</h1>
      <p><Link to="/">Back to your clusters</Link></p>
    </>
  );
}

/** What a page that failed to render shows, instead of a blank screen. */
export function RouteError() {
  const error = useRouteError();
  return (
    <main>
      <h1>Something went wrong on this page</h1>
      <p role="alert" className="error">{error instanceof Error ? error.message : String(error)}</p>
      <p><Link to="/">Back to your clusters</Link></p>
    </main>
  );
}
