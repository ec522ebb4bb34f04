import type { SkillDefinition } from '../../state/skills/skill.types';

/** Where the skill SDK is in every sandbox: the runner's directory of the image (bound read-only in bubblewrap). */
const SDK_DIR = '/opt/switchyard/runner';

/**
 * The code a skill's action runs: its body, then the entry that connects to the channel, reads the input, calls
 * `main(input, ctx)` and hands back what it returns (docker/sandbox/runner/switchyard_skill.{py,js}). The body alone
 * is what the risk policy should judge; the entry adds nothing it would score. A python body may import the SDK
 * (`from switchyard_skill import CallError`): one line before it puts the SDK on the path (so its tracebacks' line
 * numbers are one more than the file's); node bodies require it by its absolute path.
 */
export function skillCode(skill: SkillDefinition): string {
  if (skill.language === 'python') {
    return (
      `import sys as _sy; _sy.path.insert(0, ${JSON.stringify(SDK_DIR)}); del _sy\n` +
      `${skill.code}\n\n# --- switchyard: the skill's entry ---\n` +
      `import switchyard_skill as _switchyard_skill\n_switchyard_skill.run(globals().get("main"))\n`
    );
  }
  return (
    `${skill.code}\n;// --- switchyard: the skill's entry ---\n` +
    `require(${JSON.stringify(`${SDK_DIR}/switchyard_skill.js`)}).run(` +
    `typeof main === "function" ? main : module.exports);\n`
  );
}
