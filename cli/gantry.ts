import { main } from './main.ts';

// The `gantry` command (package.json "bin" runs it through cli/gantry.js).
// Ctrl-C while a watch line is being rewritten: end the line, exit as interrupted.
process.once('SIGINT', () => {
  if (process.stdout.isTTY) process.stdout.write('\n');
  process.exit(130);
});
process.exitCode = await main(process.argv.slice(2));
