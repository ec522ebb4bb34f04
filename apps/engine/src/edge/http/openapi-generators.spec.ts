import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import {
  collidingTitles,
  freeFormObjectsWithoutAdditionalProperties,
  mediaTypesWithoutSchema,
  requiredNullableProperties,
} from '../../../../../test/support/openapi-generator-rules';

/**
 * The checked-in OpenAPI document (`npm run client:generate`; test/e2e/client-openapi.e2e-spec.ts fails when it is
 * stale) keeps what outside client generators need. test/e2e/generated-clients.e2e-spec.ts runs the generators.
 */
const DOCUMENT = JSON.parse(
  readFileSync(
    path.join(__dirname, '..', '..', '..', '..', '..', 'packages', 'client', 'openapi.json'),
    'utf8',
  ),
) as unknown;

describe('the OpenAPI document, for client generators', () => {
  it('says what every object holds: no free-form object without additionalProperties', () => {
    expect(freeFormObjectsWithoutAdditionalProperties(DOCUMENT)).toEqual([]);
  });

  it('gives every title to one schema only, and none of them a component’s name', () => {
    expect(collidingTitles(DOCUMENT)).toEqual([]);
  });

  it('leaves every nullable property out of required', () => {
    expect(requiredNullableProperties(DOCUMENT)).toEqual([]);
  });

  it('gives every request and response body a schema', () => {
    expect(mediaTypesWithoutSchema(DOCUMENT)).toEqual([]);
  });

  it('finds each break in a document made to have them, so the checks above are not vacuous', () => {
    const broken = {
      info: { title: 'Session' },
      paths: {
        '/v1/x': {
          put: {
            requestBody: { content: { 'application/json': {} } },
            responses: { '200': { content: { 'application/x-tar': { schema: { type: 'string' } } } } },
          },
        },
      },
      components: {
        schemas: {
          Session: {
            type: 'object',
            required: ['metadata', 'endedAt'],
            properties: {
              metadata: { type: 'object', description: 'free-form' },
              endedAt: { type: 'string', nullable: true },
              labels: { type: 'object', additionalProperties: { type: 'string' } },
              state: {
                anyOf: [
                  { type: 'string', title: 'list' },
                  { type: 'array', title: 'list' },
                ],
              },
              kind: { type: 'string', title: 'Session', example: { title: 'list' } },
            },
          },
        },
      },
    };
    expect(freeFormObjectsWithoutAdditionalProperties(broken)).toEqual([
      '#/components/schemas/Session/properties/metadata',
    ]);
    expect(mediaTypesWithoutSchema(broken)).toEqual([
      '#/paths/~1v1~1x/put/requestBody/content/application~1json',
    ]);
    expect(requiredNullableProperties(broken)).toEqual(['#/components/schemas/Session/properties/endedAt']);
    expect(collidingTitles(broken)).toEqual([
      'title "list" at #/components/schemas/Session/properties/state/anyOf/0, ' +
        '#/components/schemas/Session/properties/state/anyOf/1',
      'title "Session" at #/components/schemas/Session/properties/kind is also a component\'s name',
    ]);
  });
});
