import { Equals, IsBoolean, IsIn, IsInt, IsOptional, IsString, Min } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

export const BROWSER_OPS = [
  'navigate',
  'click',
  'fill',
  'type',
  'press',
  'select',
  'hover',
  'check',
  'wait_for',
  'extract',
  'screenshot',
  'pdf',
  'download',
  'upload',
  'evaluate',
  'back',
  'forward',
  'reload',
  'new_tab',
  'switch_tab',
  'close_tab',
] as const;
export type BrowserOp = (typeof BROWSER_OPS)[number];

@JSONSchema({ description: 'Drive a browser page (the browser tier is not enabled in this build).' })
export class BrowserActionDto {
  @Equals('browser') type!: 'browser';

  @IsIn(BROWSER_OPS) op!: BrowserOp;

  @IsOptional() @IsString() url?: string;
  @IsOptional() @IsString() selector?: string;
  @IsOptional() @IsString() text?: string;
  @IsOptional() @IsString() value?: string;
  @IsOptional() @IsString() key?: string;
  @IsOptional() @IsString() path?: string;
  @IsOptional() @IsString() tabId?: string;
  @IsOptional() @IsString() waitUntil?: string;
  @IsOptional() @IsString() mode?: string;
  @IsOptional() @IsString() script?: string;
  @IsOptional() @IsBoolean() fullPage?: boolean;
  @IsOptional() @IsBoolean() needsFileAccess?: boolean;
  @IsOptional() @IsBoolean() persistProfile?: boolean;
  @IsOptional() @IsInt() @Min(1) timeoutMs?: number;
}
