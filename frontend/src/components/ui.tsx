// The console's shared pieces, on Mantine (docs/decisions/0033-console-design-system.md): error text where the
// user acted, loading and empty states, a confirmation dialog for destructive actions, status badges, page
// headers, form drawers, toasts, and the one data table (TanStack Table for sorting, Mantine for the look) that
// every list uses.
import {
  Badge as MantineBadge,
  Box,
  Button,
  type ButtonProps,
  Code,
  CopyButton as MantineCopyButton,
  Drawer,
  Group,
  Loader,
  Modal,
  Pagination,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
  UnstyledButton,
} from "@mantine/core";
import { notifications } from "@mantine/notifications";
import {
  type ColumnDef,
  flexRender,
  getCoreRowModel,
  getPaginationRowModel,
  getSortedRowModel,
  type OnChangeFn,
  type SortingState,
  useReactTable,
} from "@tanstack/react-table";
import { type ReactNode, useState } from "react";
import { MISSING } from "../lib/units";

export function ErrorText({ error, id }: { error: unknown; id?: string }) {
  if (!error) return null;
  const message = error instanceof Error ? error.message : String(error);
  return (
    <Text role="alert" className="error" size="sm" id={id}>
      {message}
    </Text>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <Group gap="xs" aria-busy="true" my="sm">
      <Loader size="xs" aria-hidden />
      <Text size="sm" className="muted">Loading {what}…</Text>
    </Group>
  );
}

/** A page's title with what it is for and its actions on the right (the "New …" button that opens a drawer). */
export function PageHeader({ title, description, actions, badge }: {
  title: ReactNode; description?: ReactNode; actions?: ReactNode; badge?: ReactNode;
}) {
  return (
    <Group justify="space-between" align="flex-start" mb="md" wrap="wrap" gap="sm">
      <Stack gap={4} style={{ minWidth: 0, flex: "1 1 20rem" }}>
        <Group gap="sm" wrap="wrap"><Title order={1} className="page-title">{title}</Title>{badge}</Group>
        {description && <Text size="sm" className="muted">{description}</Text>}
      </Stack>
      {actions && <Group gap="xs">{actions}</Group>}
    </Group>
  );
}

/** A titled block of a page. */
export function Section({ title, children, label, actions }: { title: string; children: ReactNode; label?: string; actions?: ReactNode }) {
  return (
    <Box component="section" aria-label={label} my="lg">
      <Group justify="space-between" mb="xs" wrap="wrap">
        <Title order={2} size="h3">{title}</Title>
        {actions && <Group gap="xs">{actions}</Group>}
      </Group>
      {children}
    </Box>
  );
}

/** A create/edit form in a drawer from the right: the list stays in view, the form is one click away. */
export function FormDrawer({ opened, onClose, title, children }: { opened: boolean; onClose: () => void; title: string; children: ReactNode }) {
  return (
    <Drawer opened={opened} onClose={onClose} title={title} position="right" size="md" padding="lg"
      closeButtonProps={{ "aria-label": "Close" }}>
      {children}
    </Drawer>
  );
}

/** Toasts: the result of an action, where the user looks next (top right), gone by themselves. */
export const toast = {
  ok: (message: string) =>
    notifications.show({ message, color: "green", withBorder: true, role: "status", closeButtonProps: { "aria-label": "Dismiss" } }),
  error: (error: unknown) =>
    notifications.show({ message: error instanceof Error ? error.message : String(error), color: "red", withBorder: true, autoClose: 8000,
      closeButtonProps: { "aria-label": "Dismiss" } }),
};

/** A destructive button that asks first, in a dialog: the action runs only after an explicit confirmation. When
 * ``typeToConfirm`` is given the user must type it (deleting a topic or a cluster). */
export function ConfirmButton({
  label, question, onConfirm, typeToConfirm, disabled, size = "xs", confirmLabel,
}: {
  label: string; question: string; onConfirm: () => void; typeToConfirm?: string; disabled?: boolean;
  size?: ButtonProps["size"]; confirmLabel?: string;
}) {
  const [asking, setAsking] = useState(false);
  const [typed, setTyped] = useState("");
  const close = () => {
    setAsking(false);
    setTyped("");
  };
  return (
    <>
      <Button color="red" variant="light" size={size} disabled={disabled} onClick={() => setAsking(true)}>{label}</Button>
      <Modal opened={asking} onClose={close} title={label} centered closeButtonProps={{ "aria-label": "Close" }}>
        <Stack>
          <Text>{question}</Text>
          {typeToConfirm && (
            <TextInput label={<>Type <Code>{typeToConfirm}</Code> to confirm</>} aria-label="Confirmation" value={typed}
              onChange={(e) => setTyped(e.currentTarget.value)} data-autofocus />
          )}
          <Group justify="flex-end">
            <Button variant="default" onClick={close}>Cancel</Button>
            <Button color="red" disabled={typeToConfirm !== undefined && typed !== typeToConfirm}
              onClick={() => {
                close();
                onConfirm();
              }}>
              {confirmLabel ?? `Confirm ${label.toLowerCase()}`}
            </Button>
          </Group>
        </Stack>
      </Modal>
    </>
  );
}

export type Tone = "ok" | "warn" | "bad" | "info" | "neutral";
const TONE_COLOR: Record<Tone, string> = { ok: "green", warn: "yellow", bad: "red", info: "blue", neutral: "gray" };

export function Badge({ tone, children, testId }: { tone: Tone; children: ReactNode; testId?: string }) {
  return (
    <MantineBadge color={TONE_COLOR[tone]} variant="light" radius="sm" className={`badge badge-${tone}`} data-testid={testId}
      style={{ textTransform: "none" }}>
      {children}
    </MantineBadge>
  );
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
  if (!ready) return <Badge tone="neutral">Unknown</Badge>;
  return ready.status === "True" ? <Badge tone="ok">Ready</Badge> : <Badge tone="warn">{ready.reason || "Not ready"}</Badge>;
}

/** Conditions whose "True" is bad news (Kubernetes' convention: Ready is good when True, Degraded when False). */
const NEGATIVE = new Set(["Degraded", "Failed", "Stalled"]);
/** Conditions that say work is under way: neither good nor bad. */
const PROGRESS = new Set(["Reconciling", "Progressing"]);

/** A condition's tone by its polarity: a healthy ``Degraded False`` is green, not yellow. */
export function conditionTone(condition: Pick<Condition, "type" | "status">): Tone {
  const on = condition.status === "True";
  if (condition.status === "Unknown") return "neutral";
  if (NEGATIVE.has(condition.type)) return on ? "bad" : "ok";
  if (PROGRESS.has(condition.type)) return on ? "info" : "ok";
  return on ? "ok" : "warn";
}

export function ConditionBadge({ condition }: { condition: Pick<Condition, "type" | "status"> }) {
  return <Badge tone={conditionTone(condition)}>{condition.status}</Badge>;
}

/** Text from the API that marks code with backticks (`sluice up`): shown as code, never as literal backticks. */
export function Prose({ text }: { text: string | null | undefined }) {
  if (!text) return <>{MISSING}</>;
  const parts = text.split(/`([^`]+)`/);
  return <>{parts.map((part, i) => (i % 2 ? <Code key={i}>{part}</Code> : part))}</>;
}

/** A copy-to-clipboard button for one value (a key, an id, a record's value). */
export function CopyButton({ value, label = "Copy" }: { value: string; label?: string }) {
  return (
    <MantineCopyButton value={value}>
      {({ copied, copy }) => (
        <Button size="compact-xs" variant="subtle" color={copied ? "green" : "gray"} onClick={copy} aria-label={label}
          style={{ flexShrink: 0 }}>
          {copied ? "Copied" : "Copy"}
        </Button>
      )}
    </MantineCopyButton>
  );
}

/** Label/value pairs of one object (a cluster's facts, a record's metadata). */
export function Facts({ items }: { items: [ReactNode, ReactNode][] }) {
  return (
    <dl className="facts">
      {items.map(([term, value], i) => (
        <div key={i} className="fact">
          <dt>{term}</dt>
          <dd>{value}</dd>
        </div>
      ))}
    </dl>
  );
}

/** Previous/next pages of a list the server pages (topics at 5,000, the audit log). */
export function Pager({ page, pages, onPage, total }: { page: number; pages: number; onPage: (page: number) => void; total?: string }) {
  return (
    <Group justify="space-between" my="sm" wrap="wrap">
      <Text size="sm" className="muted">{total}</Text>
      <nav aria-label="Pages">
        <Group gap="xs">
          <Button variant="default" size="xs" disabled={page === 0} onClick={() => onPage(page - 1)}>Previous</Button>
          <Text size="sm">Page {page + 1} of {pages}</Text>
          <Button variant="default" size="xs" disabled={page + 1 >= pages} onClick={() => onPage(page + 1)}>Next</Button>
        </Group>
      </nav>
    </Group>
  );
}

const NO_ROWS: never[] = [];

/** A table. Sorting is client-side unless ``sorting``/``onSortingChange`` are given (then the server sorts);
 * ``pageSize`` pages the rows on the client; ``loading`` shows a loading row instead of the empty state. */
export function DataTable<T>({
  data, columns, caption, sorting, onSortingChange, empty = "Nothing here yet.", rowId, loading = false, pageSize, rowTestId, onRowClick,
}: {
  data: T[] | undefined;
  columns: ColumnDef<T, any>[];
  caption: string;
  sorting?: SortingState;
  onSortingChange?: OnChangeFn<SortingState>;
  empty?: ReactNode;
  /** A stable key per row, so a row's local state never moves to another row. */
  rowId?: (row: T) => string;
  loading?: boolean;
  pageSize?: number;
  rowTestId?: string;
  onRowClick?: (row: T) => void;
}) {
  const [localSorting, setLocalSorting] = useState<SortingState>([]);
  const [pageIndex, setPageIndex] = useState(0);
  const manual = onSortingChange !== undefined;
  const rows = data ?? NO_ROWS;  // one array for "no data": a new [] per render would change the row model each time
  const table = useReactTable({
    data: rows,
    columns,
    state: { sorting: manual ? sorting : localSorting, ...(pageSize ? { pagination: { pageIndex, pageSize } } : {}) },
    onSortingChange: manual ? onSortingChange : setLocalSorting,
    manualSorting: manual,
    enableMultiSort: false,
    getRowId: rowId ? (row) => rowId(row) : undefined,
    getCoreRowModel: getCoreRowModel(),
    getSortedRowModel: getSortedRowModel(),
    // The page index is ours (state above); the table's own reset is a state update queued whenever a row model
    // changes, which with a changing row model renders again and again (a frozen tab when a click lands mid-load).
    autoResetPageIndex: false,
    ...(pageSize ? { getPaginationRowModel: getPaginationRowModel() } : {}),
  });
  const pages = pageSize ? Math.max(1, Math.ceil(rows.length / pageSize)) : 1;
  const shown = table.getRowModel().rows;
  return (
    <Box className="table-wrap">
      <Table striped highlightOnHover verticalSpacing="xs" className="data-table">
        <Table.Caption className="sr-only">{caption}</Table.Caption>
        <Table.Thead>
          {table.getHeaderGroups().map((group) => (
            <Table.Tr key={group.id}>
              {group.headers.map((header) => {
                const sorted = header.column.getIsSorted();
                const label = flexRender(header.column.columnDef.header, header.getContext());
                return (
                  <Table.Th key={header.id} scope="col"
                    aria-sort={sorted === "asc" ? "ascending" : sorted === "desc" ? "descending" : undefined}>
                    {header.column.getCanSort() ? (
                      <UnstyledButton className="sort" onClick={header.column.getToggleSortingHandler()}>
                        {label} <span aria-hidden>{sorted === "asc" ? "▲" : sorted === "desc" ? "▼" : "↕"}</span>
                      </UnstyledButton>
                    ) : (
                      label
                    )}
                  </Table.Th>
                );
              })}
            </Table.Tr>
          ))}
        </Table.Thead>
        <Table.Tbody>
          {shown.length === 0 ? (
            <Table.Tr>
              <Table.Td colSpan={columns.length}>
                {loading ? <Loading what={caption.toLowerCase()} /> : <Text size="sm" className="muted empty" py="md" ta="center">{empty}</Text>}
              </Table.Td>
            </Table.Tr>
          ) : (
            shown.map((row) => (
              <Table.Tr key={row.id} data-testid={rowTestId} onClick={onRowClick ? () => onRowClick(row.original) : undefined}
                className={onRowClick ? "clickable" : undefined}>
                {row.getVisibleCells().map((cell) => (
                  <Table.Td key={cell.id}>{flexRender(cell.column.columnDef.cell, cell.getContext())}</Table.Td>
                ))}
              </Table.Tr>
            ))
          )}
        </Table.Tbody>
      </Table>
      {pageSize && pages > 1 && (
        <Group justify="flex-end" my="xs">
          <Pagination size="sm" total={pages} value={Math.min(pageIndex, pages - 1) + 1} onChange={(p) => setPageIndex(p - 1)}
            getControlProps={(control) => ({ "aria-label": `${control} page` })} />
        </Group>
      )}
    </Box>
  );
}

export function when(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : MISSING;
}
