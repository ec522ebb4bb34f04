// A skill calling a tool (`find`, `write`) and another skill (`word-count`), each a recorded action of its own.
async function main(input, ctx) {
  const dir = input.dir ?? '.';
  const found = await ctx.call('find', { path: dir, pattern: '**/*.txt' });
  const paths = found.output.paths;
  const rows = [];
  let words = 0;
  for (const path of paths) {
    const counts = await ctx.skill('word-count', { path });
    words += counts.words;
    rows.push(`| ${path} | ${counts.lines} | ${counts.words} |`);
  }
  const report = ['| file | lines | words |', '| --- | --- | --- |', ...rows, ''].join('\n');
  await ctx.call('write', { path: 'report.md', content: report });
  return { files: paths.length, words, report: 'report.md' };
}
