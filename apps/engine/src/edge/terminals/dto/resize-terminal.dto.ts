import { IsInt, Max, Min } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { TERMINAL_COLS, TERMINAL_ROWS } from './open-terminal.dto';

@JSONSchema({ description: "A terminal's new size: its programs get SIGWINCH and redraw." })
export class ResizeTerminalDto {
  @IsInt()
  @Min(TERMINAL_COLS.min)
  @Max(TERMINAL_COLS.max)
  @JSONSchema({ description: 'Columns.' })
  cols!: number;

  @IsInt()
  @Min(TERMINAL_ROWS.min)
  @Max(TERMINAL_ROWS.max)
  @JSONSchema({ description: 'Rows.' })
  rows!: number;
}
