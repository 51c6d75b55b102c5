/**
 * Setup file of every test project: the services' own log lines (the handlers' JSON lines,
 * functions/_log.ts) are off in `npm test` so the output is the test report; GANTRY_TEST_LOGS=1
 * turns them on (level info), and an explicit GANTRY_LOG_LEVEL always wins. Tests that read the
 * log lines set the level themselves.
 */
if (process.env.GANTRY_LOG_LEVEL === undefined) {
  process.env.GANTRY_LOG_LEVEL = process.env.GANTRY_TEST_LOGS === '1' ? 'info' : 'silent';
}
