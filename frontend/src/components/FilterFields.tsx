import { Button, Fieldset, Group, SimpleGrid, TextInput } from "@mantine/core";
import { memo } from "react";
import type { FilterFields } from "../lib/filters";

/** The filter inputs shared by browse and live tail; the server applies them (JMESPath). */
export const FilterInputs = memo(function FilterInputs({ fields, onChange }: { fields: FilterFields; onChange: (fields: FilterFields) => void }) {
  const field = (name: keyof FilterFields, label: string, placeholder = "") => (
    <TextInput size="xs" label={label} value={fields[name] ?? ""} placeholder={placeholder}
      onChange={(e) => onChange({ ...fields, [name]: e.currentTarget.value })} />
  );
  return (
    <Fieldset legend="Filters" variant="filled" p="xs">
      <SimpleGrid cols={{ base: 2, lg: 6 }} spacing="xs">
        {field("key", "Key contains")}
        {field("value", "Value contains")}
        {field("header", "Header", "name=value")}
        {field("jsonPath", "JSON field", "order.status")}
        {field("jsonValue", "equals", "paid")}
        {field("expression", "JMESPath", "partition == `0`")}
      </SimpleGrid>
      {Object.values(fields).some(Boolean) && (
        <Group justify="flex-end" mt={4}>
          <Button size="compact-xs" variant="subtle" onClick={() => onChange({})}>Clear filters</Button>
        </Group>
      )}
    </Fieldset>
  );
});
