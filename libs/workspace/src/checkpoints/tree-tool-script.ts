import { readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * The tree tool's Python source (`tree_tool.py`, next to this file: what it does and why is documented there), run by
 * `TreeTool` as `python3 -I -S -c <source>`. Read once, when this module loads: `scripts/build.mjs` copies the `.py`
 * files into `dist/` beside the compiled modules, and under ts-jest this is the source tree.
 */
export const TREE_TOOL_SOURCE = readFileSync(path.join(__dirname, 'tree_tool.py'), 'utf8');
