import { COMMANDS, parseCommandLine, UsageError, usage } from './args.ts';
import { ApiError, makeClient, UnreachableError } from './client.ts';
import * as commands from './commands.ts';
import { EXIT, exitCodeForStatus } from './exit-codes.ts';
import * as inspect from './inspect.ts';
import * as models from './models.ts';
import { loadProfiles, resolveTarget } from './profiles.ts';
import { formatApiError } from './render.ts';

/** `gantry <command> …`: parse, resolve the target, run the command, map what happened to an exit code. */
export async function main(
  argv: readonly string[],
  env: Record<string, string | undefined> = process.env,
  io: commands.Io = {
    stdout: process.stdout,
    stderr: process.stderr,
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
  },
): Promise<number> {
  // Known before parsing, so a usage error can point at the command's own help.
  const command = argv[0] !== undefined && Object.hasOwn(COMMANDS, argv[0]) ? argv[0] : undefined;
  try {
    const parsed = parseCommandLine(argv);
    if ('help' in parsed) {
      io.stdout.write(`${parsed.help}\n`);
      return EXIT.ok;
    }
    const file = await loadProfiles(env);
    const target = resolveTarget({
      ...(parsed.profile !== undefined ? { profile: parsed.profile } : {}),
      ...(parsed.endpoint !== undefined ? { endpoint: parsed.endpoint } : {}),
      ...(parsed.principal !== undefined ? { principal: parsed.principal } : {}),
      env,
      ...(file !== undefined ? { file } : {}),
    });
    const client = makeClient(target);
    const id = parsed.args.ID as string;
    switch (parsed.command) {
      case 'submit':
        return await commands.submit(client, io, parsed);
      case 'watch':
        return await commands.watch(client, io, id, parsed.intervalSeconds);
      case 'logs':
        return await commands.logs(client, io, parsed);
      case 'events':
        return await commands.events(client, io, parsed);
      case 'ls':
        return await commands.ls(client, io, parsed);
      case 'cancel':
        return await commands.cancel(client, io, id, parsed.output);
      case 'sweep':
        return await commands.sweep(client, io, id, parsed.output);
      case 'validate':
        return await commands.validate(client, io, parsed.args.FILE as string, parsed.output);
      case 'show':
        return await inspect.show(client, io, parsed);
      case 'sweeps':
        return await inspect.sweeps(client, io, parsed);
      case 'metrics':
        return await inspect.metrics(client, io, parsed);
      case 'rerun':
        return await inspect.rerun(client, io, parsed);
      case 'models':
        return await models.list(client, io);
      case 'model':
        return await models.show(client, io, parsed);
      case 'promote':
        return await models.promote(client, io, parsed);
      case 'rollback':
        return await models.rollback(client, io, parsed);
      case 'usage':
        return await commands.usageReport(client, io, parsed);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`error: ${err.message}\n${command ? `(gantry ${command} --help)` : usage()}\n`);
      return EXIT.usage;
    }
    if (err instanceof ApiError) {
      io.stderr.write(`${formatApiError(err.status, err.body)}\n`);
      return exitCodeForStatus(err.status);
    }
    if (err instanceof UnreachableError) {
      io.stderr.write(`error: ${err.message}\n`);
      return EXIT.unavailable;
    }
    throw err;
  }
}
