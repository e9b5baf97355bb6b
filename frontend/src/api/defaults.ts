// The create forms' starting values are the API's defaults, never the console's own: the API owns them (a topic's
// partition count is controlplane.resources.models.DEFAULT_PARTITIONS) and publishes each as its OpenAPI field
// default. defaults.test.ts fails when a value here drifts from api_schema/openapi.yaml.
export const API_DEFAULTS = {
  topic: { partitions: 6 },
  cluster: { plan: "basic" },
  invitation: { role: "member" },
  serviceAccount: { role: "member" },
} as const;
