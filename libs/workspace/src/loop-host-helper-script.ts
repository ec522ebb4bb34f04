import { readFileSync } from 'node:fs';
import * as path from 'node:path';

/**
 * The loop helper's Python source (`loop_host_helper.py`, next to this file: what it does and why is documented
 * there), run as root by `HelperLoopHost` as `python3 -I -S -c <source>`. Read once, when this module loads:
 * `scripts/build.mjs` copies the `.py` files into `dist/` beside the compiled modules, and under ts-jest this is the
 * source tree.
 */
export const LOOP_HELPER_SOURCE = readFileSync(path.join(__dirname, 'loop_host_helper.py'), 'utf8');
