import type { FilterFields } from "../lib/filters";

/** The filter inputs shared by browse and live tail; the server applies them (JMESPath). */
export function FilterInputs({ fields, onChange }: { fields: FilterFields; onChange: (fields: FilterFields) => void }) {
  const field = (name: keyof FilterFields, label: string, placeholder = "") => (
    <label>
      {label} <input value={fields[name] ?? ""} placeholder={placeholder} onChange={(e) => onChange({ ...fields, [name]: e.target.value })} />
    </label>
  );
  return (
    <fieldset className="inline">
      <legend>Filters</legend>
      {field("key", "Key contains")}
      {field("value", "Value contains")}
      {field("header", "Header", "name=value")}
      {field("jsonPath", "JSON field", "order.status")}
      {field("jsonValue", "equals", "paid")}
      {field("expression", "JMESPath", "partition == `0`")}
    </fieldset>
  );
}
