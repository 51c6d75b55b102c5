import { main } from './main.ts';

// The `gantry` command (package.json "bin" runs it through cli/gantry.js).
process.exitCode = await main(process.argv.slice(2));
