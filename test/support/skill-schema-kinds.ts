/**
 * Tenant skills of the three kinds of input schema the tool lists must get right (issue 35): a discriminated `oneOf`
 * (strict as `anyOf`), a free-form object (no strict form: listed `strict: false`), and nested closed objects with
 * optional fields (strict, the optional ones nullable). Used by the contract test and the tool-schemas property test.
 */
export const SKILL_SCHEMA_KINDS = [
  {
    name: 'shape_area',
    description: 'The area of a circle or a square',
    language: 'python',
    code: 'def main(input, ctx):\n    return {"area": input["shape"].get("r", input["shape"].get("side", 0))}',
    inputSchema: {
      type: 'object',
      properties: {
        shape: {
          oneOf: [
            {
              type: 'object',
              properties: { kind: { const: 'circle' }, r: { type: 'number' } },
              required: ['kind', 'r'],
              additionalProperties: false,
            },
            {
              type: 'object',
              properties: { kind: { const: 'square' }, side: { type: 'number' } },
              required: ['kind', 'side'],
              additionalProperties: false,
            },
          ],
        },
      },
      required: ['shape'],
      additionalProperties: false,
    },
    outputSchema: { type: 'object' },
  },
  {
    name: 'echo_any',
    description: 'Answers its input as it came',
    language: 'python',
    code: 'def main(input, ctx):\n    return input',
    inputSchema: { type: 'object' },
    outputSchema: { type: 'object' },
  },
  {
    name: 'nested_note',
    description: 'Files a note with an optional author',
    language: 'python',
    code: 'def main(input, ctx):\n    return {"ok": True}',
    inputSchema: {
      type: 'object',
      properties: {
        note: {
          type: 'object',
          properties: {
            text: { type: 'string', maxLength: 200 },
            author: { type: 'object', properties: { name: { type: 'string' } }, additionalProperties: false },
          },
          required: ['text'],
          additionalProperties: false,
        },
        tags: { type: 'array', items: { type: 'string' }, maxItems: 5 },
      },
      required: ['note'],
      additionalProperties: false,
    },
    outputSchema: { type: 'object' },
  },
];
