import {
  BROWSER_OPS,
  type BrowserOp,
  EXTRACT_MODES,
  type ExtractMode,
  LOAD_STATES,
  type LoadState,
  MOUSE_BUTTONS,
  type MouseButton,
  SELECTOR_STATES,
  type SelectorState,
  WAIT_UNTIL,
  type WaitUntil,
} from '@switchyard/browser';
import {
  ArrayMaxSize,
  ArrayMinSize,
  Equals,
  IsArray,
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  Validate,
  type ValidationArguments,
  ValidatorConstraint,
  type ValidatorConstraintInterface,
} from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';

export { BROWSER_OPS, type BrowserOp };

const MAX_URL = 8192;
const MAX_SELECTOR = 4096;
const MAX_TEXT = 1024 * 1024;

/** Fields every browser action may carry. */
abstract class BrowserActionBase {
  @Equals('browser')
  type!: 'browser';

  @IsOptional()
  @IsInt()
  @Min(1)
  // Any larger is capped anyway; past this a number is no longer an exact integer in JSON readers.
  @Max(Number.MAX_SAFE_INTEGER)
  @JSONSchema({ description: 'Timeout of this op in milliseconds (default 30000, capped by the engine).' })
  timeoutMs?: number;

  @IsOptional()
  @IsBoolean()
  @JSONSchema({
    description:
      "Run this session's browsing in a dedicated browser (own process, profile and downloads) from now on.",
  })
  needsFileAccess?: boolean;

  @IsOptional()
  @IsBoolean()
  @JSONSchema({ description: 'Same as needsFileAccess: keep a profile that survives browser restarts.' })
  persistProfile?: boolean;
}

abstract class SelectorField extends BrowserActionBase {
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_SELECTOR)
  @JSONSchema({ description: 'Playwright selector (CSS, text=…, role=…); must match exactly one element.' })
  selector!: string;
}

abstract class WorkspacePathField extends BrowserActionBase {
  @IsString()
  @MinLength(1)
  @JSONSchema({ description: 'Path relative to the session workspace.' })
  path!: string;
}

const waitUntil = () =>
  JSONSchema({
    description: 'When the navigation counts as done: load (default), domcontentloaded, networkidle, commit.',
  });

@JSONSchema({ description: 'Open a URL in the current tab. Only http/https; private addresses are refused.' })
export class BrowserNavigateDto extends BrowserActionBase {
  @Equals('navigate') op!: 'navigate';

  @IsString()
  @MaxLength(MAX_URL)
  url!: string;

  @IsOptional()
  @IsIn(WAIT_UNTIL)
  @waitUntil()
  waitUntil?: WaitUntil;
}

@JSONSchema({ description: 'Click an element.' })
export class BrowserClickDto extends SelectorField {
  @Equals('click') op!: 'click';

  @IsOptional()
  @IsIn(MOUSE_BUTTONS)
  button?: MouseButton;

  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(3)
  clickCount?: number;
}

@JSONSchema({ description: 'Set the value of an input, textarea or contenteditable.' })
export class BrowserFillDto extends SelectorField {
  @Equals('fill') op!: 'fill';

  @IsString()
  @MaxLength(MAX_TEXT)
  value!: string;
}

@JSONSchema({ description: 'Type text key by key into an element.' })
export class BrowserTypeDto extends SelectorField {
  @Equals('type') op!: 'type';

  @IsString()
  @MaxLength(MAX_TEXT)
  text!: string;

  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(1000)
  @JSONSchema({ description: 'Pause between keys in milliseconds.' })
  delayMs?: number;
}

@JSONSchema({ description: 'Press a key (e.g. Enter, Control+A), on an element or the focused one.' })
export class BrowserPressDto extends BrowserActionBase {
  @Equals('press') op!: 'press';

  @IsString()
  @MinLength(1)
  @MaxLength(64)
  key!: string;

  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_SELECTOR)
  selector?: string;
}

@JSONSchema({ description: 'Choose options of a <select> by value or label.' })
export class BrowserSelectDto extends SelectorField {
  @Equals('select') op!: 'select';

  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(100)
  @IsString({ each: true })
  values!: string[];
}

@JSONSchema({ description: 'Move the mouse over an element.' })
export class BrowserHoverDto extends SelectorField {
  @Equals('hover') op!: 'hover';
}

@JSONSchema({ description: 'Check (or, with checked: false, uncheck) a checkbox or radio button.' })
export class BrowserCheckDto extends SelectorField {
  @Equals('check') op!: 'check';

  @IsOptional()
  @IsBoolean()
  checked?: boolean;
}

const WAIT_FIELDS = ['selector', 'text', 'url', 'loadState'] as const;

/** `wait_for` waits for exactly one thing. */
@ValidatorConstraint({ name: 'exactlyOneWaitTarget' })
class ExactlyOneWaitTarget implements ValidatorConstraintInterface {
  validate(_: unknown, args: ValidationArguments): boolean {
    const o = args.object as Record<string, unknown>;
    return WAIT_FIELDS.filter((f) => o[f] !== undefined).length === 1;
  }

  defaultMessage(): string {
    return `wait_for needs exactly one of ${WAIT_FIELDS.join(', ')}`;
  }
}

@JSONSchema({
  description: 'Wait for a selector, a text, a URL or a load state (exactly one).',
  // Exactly one of them given (not null): each branch holds when its field is a string.
  oneOf: WAIT_FIELDS.map((f) => ({ required: [f], properties: { [f]: { type: 'string' } } })),
})
export class BrowserWaitForDto extends BrowserActionBase {
  @Equals('wait_for')
  @Validate(ExactlyOneWaitTarget)
  op!: 'wait_for';

  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_SELECTOR)
  selector?: string;

  @IsOptional()
  @IsIn(SELECTOR_STATES)
  @JSONSchema({ description: 'With selector: attached, detached, visible (default) or hidden.' })
  state?: SelectorState;

  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_SELECTOR)
  text?: string;

  @IsOptional()
  @IsString()
  @MaxLength(MAX_URL)
  @JSONSchema({ description: 'URL (or glob such as **/done) the tab must reach.' })
  url?: string;

  @IsOptional()
  @IsIn(LOAD_STATES)
  loadState?: LoadState;
}

@JSONSchema({
  description:
    'Read the page or the elements a selector matches: text, html, links or an accessibility snapshot (capped).',
})
export class BrowserExtractDto extends BrowserActionBase {
  @Equals('extract') op!: 'extract';

  @IsIn(EXTRACT_MODES)
  mode!: ExtractMode;

  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_SELECTOR)
  selector?: string;
}

@JSONSchema({ description: 'Save a PNG of the viewport, the full page or one element into the workspace.' })
export class BrowserScreenshotDto extends WorkspacePathField {
  @Equals('screenshot') op!: 'screenshot';

  @IsOptional()
  @IsBoolean()
  fullPage?: boolean;

  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(MAX_SELECTOR)
  selector?: string;
}

@JSONSchema({ description: 'Print the page to a PDF in the workspace.' })
export class BrowserPdfDto extends WorkspacePathField {
  @Equals('pdf') op!: 'pdf';
}

@JSONSchema({
  description:
    'Click an element that starts a download and save the file at path (a path ending in / keeps the file name).',
})
export class BrowserDownloadDto extends WorkspacePathField {
  @Equals('download') op!: 'download';

  @IsString()
  @MinLength(1)
  @MaxLength(MAX_SELECTOR)
  selector!: string;
}

@JSONSchema({ description: 'Put a workspace file into a file input.' })
export class BrowserUploadDto extends WorkspacePathField {
  @Equals('upload') op!: 'upload';

  @IsString()
  @MinLength(1)
  @MaxLength(MAX_SELECTOR)
  selector!: string;
}

@JSONSchema({
  description:
    'Run JavaScript in the page (disabled unless SWITCHYARD_BROWSER_EVALUATE=true; scored by the risk policy). ' +
    'The value of the last expression is returned; a function is called first.',
})
export class BrowserEvaluateDto extends BrowserActionBase {
  @Equals('evaluate') op!: 'evaluate';

  @IsString()
  @MinLength(1)
  @MaxLength(MAX_TEXT)
  script!: string;
}

abstract class HistoryDto extends BrowserActionBase {
  @IsOptional()
  @IsIn(WAIT_UNTIL)
  @waitUntil()
  waitUntil?: WaitUntil;
}

@JSONSchema({ description: 'Go back in the tab history.' })
export class BrowserBackDto extends HistoryDto {
  @Equals('back') op!: 'back';
}

@JSONSchema({ description: 'Go forward in the tab history.' })
export class BrowserForwardDto extends HistoryDto {
  @Equals('forward') op!: 'forward';
}

@JSONSchema({ description: 'Reload the tab.' })
export class BrowserReloadDto extends HistoryDto {
  @Equals('reload') op!: 'reload';
}

@JSONSchema({ description: 'Open a tab (optionally at a URL) and make it current.' })
export class BrowserNewTabDto extends HistoryDto {
  @Equals('new_tab') op!: 'new_tab';

  @IsOptional()
  @IsString()
  @MaxLength(MAX_URL)
  url?: string;
}

const TAB_ID = /^tab_[0-9]{1,9}$/;

@JSONSchema({ description: 'Make another open tab current.' })
export class BrowserSwitchTabDto extends BrowserActionBase {
  @Equals('switch_tab') op!: 'switch_tab';

  @IsString()
  @Matches(TAB_ID, { message: 'tabId must look like tab_1' })
  tabId!: string;
}

@JSONSchema({ description: 'Close a tab (default: the current one).' })
export class BrowserCloseTabDto extends BrowserActionBase {
  @Equals('close_tab') op!: 'close_tab';

  @IsOptional()
  @IsString()
  @Matches(TAB_ID, { message: 'tabId must look like tab_1' })
  tabId?: string;
}

export const BROWSER_ACTION_DTOS = {
  navigate: BrowserNavigateDto,
  click: BrowserClickDto,
  fill: BrowserFillDto,
  type: BrowserTypeDto,
  press: BrowserPressDto,
  select: BrowserSelectDto,
  hover: BrowserHoverDto,
  check: BrowserCheckDto,
  wait_for: BrowserWaitForDto,
  extract: BrowserExtractDto,
  screenshot: BrowserScreenshotDto,
  pdf: BrowserPdfDto,
  download: BrowserDownloadDto,
  upload: BrowserUploadDto,
  evaluate: BrowserEvaluateDto,
  back: BrowserBackDto,
  forward: BrowserForwardDto,
  reload: BrowserReloadDto,
  new_tab: BrowserNewTabDto,
  switch_tab: BrowserSwitchTabDto,
  close_tab: BrowserCloseTabDto,
} satisfies Record<BrowserOp, new () => BrowserActionBase>;

export type BrowserActionDto = InstanceType<(typeof BROWSER_ACTION_DTOS)[BrowserOp]>;
