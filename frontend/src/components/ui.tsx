// Small shared pieces: error text where the user acted, a confirm step for destructive actions, status badges,
// and the one table component (TanStack Table) every list uses.
import {
  type ColumnDef,
  flexRender,
  getCoreRowModel,
  getSortedRowModel,
  type OnChangeFn,
  type SortingState,
  useReactTable,
} from "@tanstack/react-table";
import { type ReactNode, useState } from "react";

export function ErrorText({ error }: { error: unknown }) {
  if (!error) return null;
  const message = error instanceof Error ? error.message : String(error);
  return (
    <p role="alert" className="error">
      {message}
    </p>
  );
}

export function Loading({ what }: { what: string }) {
  return <p aria-busy="true" className="muted">Loading {what}…</p>;
}

/** A destructive button that asks first: the action runs only after a second, explicit confirmation. When
 * ``typeToConfirm`` is given the user must type it (deleting a topic). */
export function ConfirmButton({
  label, question, onConfirm, typeToConfirm, disabled,
}: { label: string; question: string; onConfirm: () => void; typeToConfirm?: string; disabled?: boolean }) {
  const [asking, setAsking] = useState(false);
  const [typed, setTyped] = useState("");
  if (!asking)
    return (
      <button type="button" className="danger" disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  return (
    <span role="group" aria-label={question} className="confirm">
      <span>{question}</span>
      {typeToConfirm && (
        <label>
          Type <code>{typeToConfirm}</code> to confirm{" "}
          <input value={typed} onChange={(e) => setTyped(e.target.value)} aria-label="Confirmation" />
        </label>
      )}
      <button
        type="button"
        className="danger"
        disabled={typeToConfirm !== undefined && typed !== typeToConfirm}
        onClick={() => {
          setAsking(false);
          setTyped("");
          onConfirm();
        }}
      >
        Confirm {label.toLowerCase()}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

export function Badge({ tone, children }: { tone: "ok" | "warn" | "bad" | "info"; children: ReactNode }) {
  return <span className={`badge badge-${tone}`}>{children}</span>;
}

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  last_transition_time?: string;
}

export function readyOf(status: unknown): Condition | undefined {
  const conditions = ((status ?? {}) as { conditions?: Condition[] }).conditions ?? [];
  return conditions.find((c) => c.type === "Ready");
}

export function ReadyBadge({ status }: { status: unknown }) {
  const ready = readyOf(status);
  if (!ready) return <Badge tone="info">Unknown</Badge>;
  return ready.status === "True" ? <Badge tone="ok">Ready</Badge> : <Badge tone="warn">{ready.reason || "Not ready"}</Badge>;
}

/** A table. Sorting is client-side unless ``sorting``/``onSortingChange`` are given (then the server sorts). */
export function DataTable<T>({
  data, columns, caption, sorting, onSortingChange, empty = "Nothing here yet.", rowId,
}: {
  data: T[];
  columns: ColumnDef<T, any>[];
  caption: string;
  sorting?: SortingState;
  onSortingChange?: OnChangeFn<SortingState>;
  empty?: string;
  /** A stable key per row, so a row's local state (a pending confirmation) never moves to another row. */
  rowId?: (row: T) => string;
}) {
  const [localSorting, setLocalSorting] = useState<SortingState>([]);
  const manual = onSortingChange !== undefined;
  const table = useReactTable({
    data,
    columns,
    state: { sorting: manual ? sorting : localSorting },
    onSortingChange: manual ? onSortingChange : setLocalSorting,
    manualSorting: manual,
    enableMultiSort: false,
    getRowId: rowId ? (row) => rowId(row) : undefined,
    getCoreRowModel: getCoreRowModel(),
    getSortedRowModel: getSortedRowModel(),
  });
  return (
    <table>
      <caption className="sr-only">{caption}</caption>
      <thead>
        {table.getHeaderGroups().map((group) => (
          <tr key={group.id}>
            {group.headers.map((header) => {
              const sorted = header.column.getIsSorted();
              const label = flexRender(header.column.columnDef.header, header.getContext());
              return (
                <th
                  key={header.id}
                  scope="col"
                  aria-sort={sorted === "asc" ? "ascending" : sorted === "desc" ? "descending" : undefined}
                >
                  {header.column.getCanSort() ? (
                    <button type="button" className="link" onClick={header.column.getToggleSortingHandler()}>
                      {label} {sorted === "asc" ? "▲" : sorted === "desc" ? "▼" : ""}
                    </button>
                  ) : (
                    label
                  )}
                </th>
              );
            })}
          </tr>
        ))}
      </thead>
      <tbody>
        {table.getRowModel().rows.length === 0 ? (
          <tr>
            <td colSpan={columns.length} className="muted">
              {empty}
            </td>
          </tr>
        ) : (
          table.getRowModel().rows.map((row) => (
            <tr key={row.id}>
              {row.getVisibleCells().map((cell) => (
                <td key={cell.id}>{flexRender(cell.column.columnDef.cell, cell.getContext())}</td>
              ))}
            </tr>
          ))
        )}
      </tbody>
    </table>
  );
}

export function when(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : "—";
}
