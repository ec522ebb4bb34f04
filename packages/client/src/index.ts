export { DEFAULT_URL, SwitchyardClient } from './client';
export type { RequestOptions, SwitchyardClientOptions, WaitOptions } from './client';
export { graphToDot } from './dot';
export { connectionError, errorFromResponse, SwitchyardError } from './errors';
export type { FieldError } from './errors';
export { SseParser, sessionEventStream } from './sse';
export type { EventStreamOptions, OpenStream, SseMessage } from './sse';
export type * from './types';
export type { components, operations, paths } from './generated/schema';
