#!/usr/bin/env node
/**
 * The `tenure` command: run a command only while this process leads (`tenure run`), under a
 * distributed lock (`tenure lock`), or print who leads (`tenure leader`), on etcd, ZooKeeper,
 * Redis or Postgres. Status lines go to stderr; the child's output passes through untouched.
 */
import { createRequire } from 'node:module';
import { hostname } from 'node:os';
import { Command, CommanderError, Option } from 'commander';
import { BACKENDS, SSL_MODES, aclList, duration, endpointList, label, passEnvList } from './args.js';
import type { StoreFlags } from './common.js';
import { EXIT } from './exit-codes.js';
import { addSecret, endpointSecrets, redact, registerEnvSecrets, WITHHELD } from './secrets.js';

const { version } = createRequire(import.meta.url)('../../package.json') as { version: string };

const EXIT_CODES_HELP = `
Exit codes:
  the child's own    the command exited (128 + N when killed by signal N)
  2                  bad usage: an unknown flag, a bad value, a missing command
  69                 the store could not be reached at start-up
  70                 internal error
  75                 leadership or the lock was lost while the command ran (it was stopped)
  124                tenure lock: --timeout passed before the lock was granted
  126, 127           the command could not be executed / was not found

Environment: TENURE_BACKEND, TENURE_ENDPOINTS, TENURE_USER, TENURE_PASSWORD_FILE,
TENURE_CACERT, TENURE_CERT and TENURE_KEY stand in for their flags; TENURE_PASSWORD holds the
password itself (there is no --password: the command line shows in ps and shell history).
The command gets TENURE_FENCE (send it with every write it makes), TENURE_NAME and TENURE_ID,
and tenure's environment without its secrets (TENURE_PASSWORD; PGPASSWORD on postgres;
TENURE_ENDPOINTS when it holds a password) unless --pass-env names them.`;

function storeFlags(cmd: Command): Command {
  return cmd
    .addOption(new Option('--backend <store>', 'the store (required)').choices(BACKENDS).env('TENURE_BACKEND'))
    .addOption(new Option('--endpoints <list>', 'comma-separated (required): etcd URLs or host:port, a ZooKeeper connection string, a Redis host:port or redis:// URL, a Postgres host:port or postgres:// URL').argParser(endpointList).env('TENURE_ENDPOINTS'))
    .addOption(new Option('--name <name>', 'the election or lock name, shared by every participant (required)').argParser(label))
    .addOption(new Option('--call-timeout <duration>', 'bound on reaching the store and on each call to it').argParser(duration({ min: 10 })).default(5000, '5s'))
    .addOption(new Option('--user <name>', 'etcd user, ZooKeeper digest user, Redis ACL user or Postgres role').argParser(label).env('TENURE_USER'))
    .addOption(new Option('--password-file <file>', "a file holding the user's password (else TENURE_PASSWORD)").env('TENURE_PASSWORD_FILE'))
    .addOption(new Option('--cacert <file>', 'TLS: the CA to trust (PEM); TLS is on with any of --cacert, --cert, https://, rediss://').env('TENURE_CACERT'))
    .addOption(new Option('--cert <file>', 'TLS: client certificate (PEM), with --key').env('TENURE_CERT'))
    .addOption(new Option('--key <file>', "TLS: the client certificate's key (PEM)").env('TENURE_KEY'))
    .addOption(new Option('--sslmode <mode>', 'postgres: as libpq (default verify-full with TLS files, else PGSSLMODE)').choices(SSL_MODES))
    .addOption(new Option('--schema <name>', "postgres: the application's schema (SCHEMA_SQL / GRANTS_SQL)"))
    .addOption(new Option('--acl <list>', 'zk: ACL of the nodes tenure creates: creator (--user only: the default with --user), open, or scheme:id:perms, comma-separated').argParser(aclList))
    .addOption(new Option('--password <password>', 'refused').hideHelp());
}

/**
 * The required flags, checked after parsing (not by commander's mandatory options, which would
 * report a missing --backend before an unknown flag the user mistyped).
 */
function required(cmd: Command, flags: Flags): void {
  if (flags.password !== undefined) {
    cmd.error('error: --password is not accepted (the command line shows in ps and shell history): use --password-file or TENURE_PASSWORD', { exitCode: EXIT.usage, code: 'tenure.passwordOnCommandLine' });
  }
  for (const [flag, env] of [['backend', 'TENURE_BACKEND'], ['endpoints', 'TENURE_ENDPOINTS'], ['name', undefined]] as const) {
    if (flags[flag] === undefined) cmd.error(`error: required option '--${flag}' not specified${env ? ` (nor ${env})` : ''}`, { exitCode: EXIT.usage, code: 'tenure.missingOption' });
  }
  const inEndpoints = flags.endpoints.flatMap(endpointSecrets);
  for (const s of inEndpoints) addSecret(s);
  if (inEndpoints.length > 0 && cmd.getOptionValueSource('endpoints') === 'cli') {
    process.stderr.write('tenure: warning: the password in --endpoints shows in ps and shell history (use --password-file or TENURE_PASSWORD)\n');
  }
}

function participantFlags(cmd: Command): Command {
  return cmd
    .addOption(new Option('--id <id>', "this participant's id, as `tenure leader` shows it").argParser(label).default(`${hostname()}-${process.pid}`, 'hostname-pid'))
    .addOption(new Option('--ttl <duration>', 'lease TTL (etcd: whole seconds; ZooKeeper: the session timeout)').argParser(duration({ min: 100 })).default(10_000, '10s'))
    .addOption(new Option('--pass-env <names>', `give the command these of the variables tenure withholds (${WITHHELD.join(', ')}), or all`).argParser(passEnvList))
    .addOption(new Option('--grace <duration>', "after SIGTERM, how long the command has before SIGKILL (default: TTL/5); the term ends this much (+ up to 250 ms) before the lease could expire, so the SIGKILL lands before the store can grant the name elsewhere: it must fit the TTL").argParser(duration({ allowZero: true })));
}

type Flags = Record<string, unknown> & StoreFlags;

/** Builds the program; `exit` receives each command's exit code. */
export function program(exit: (code: number) => void): Command {
  const tenure = new Command('tenure')
    .description('Run a command only while this process leads, or under a distributed lock, on etcd, ZooKeeper, Redis or Postgres.')
    .version(version)
    .enablePositionalOptions()
    .exitOverride()
    .configureOutput({ outputError: () => undefined }); // one line of our own, below

  participantFlags(storeFlags(tenure.command('run')))
    .description('Campaign for NAME and run the command while leading: SIGTERM (then SIGKILL after --grace) when leadership ends, before the store can grant it elsewhere; resign when the command exits.')
    .option('--restart', 'run the command again when it exits while still leading, and campaign again after a lost term')
    .argument('<command...>', 'the command and its arguments, after --')
    .passThroughOptions()
    .addHelpText('after', `${EXIT_CODES_HELP}\n\nExample:\n  tenure run --backend etcd --endpoints 127.0.0.1:2379 --name nightly -- ./report.sh --full`)
    .action(async (command: string[], flags: Flags, cmd: Command) => {
      required(cmd, flags);
      const { runCommand } = await import('./run.js');
      exit(await runCommand({ ...flags, id: flags.id as string, ttl: flags.ttl as number, grace: flags.grace as number | undefined, restart: flags.restart === true }, command));
    });

  participantFlags(storeFlags(tenure.command('lock')))
    .description('Wait for the lock NAME, run the command once, release it; the command is stopped the same way if the lock is lost.')
    .addOption(new Option('--timeout <duration>', 'how long to wait for the lock (0: no limit)').argParser(duration({ allowZero: true })).default(30_000, '30s'))
    .argument('<command...>', 'the command and its arguments, after --')
    .passThroughOptions()
    .addHelpText('after', `${EXIT_CODES_HELP}\n\nExample:\n  tenure lock --backend redis --endpoints 127.0.0.1:6379 --name migrate --timeout 2m -- npm run migrate`)
    .action(async (command: string[], flags: Flags, cmd: Command) => {
      required(cmd, flags);
      const { lockCommand } = await import('./lock.js');
      exit(await lockCommand({ ...flags, id: flags.id as string, ttl: flags.ttl as number, grace: flags.grace as number | undefined, timeout: flags.timeout as number }, command));
    });

  storeFlags(tenure.command('leader'))
    .description("Print NAME's current leader (id and fence); with --watch, every change until SIGINT.")
    .option('--watch', 'keep printing every change of leader')
    .option('--json', 'one JSON object per line: {"id":…,"fence":…} or null')
    .addHelpText('after', '\nEnvironment: the flags marked env: above; TENURE_PASSWORD holds the password (there is no --password).\n\nExample:\n  tenure leader --backend zk --endpoints 127.0.0.1:2181 --name nightly --watch --json')
    .action(async (flags: Flags, cmd: Command) => {
      required(cmd, flags);
      const { leaderCommand } = await import('./leader.js');
      exit(await leaderCommand({ ...flags, watch: flags.watch === true, json: flags.json === true }));
    });
  return tenure;
}

/** Parses argv, runs the command, exits: 2 with one line naming the flag on bad usage. */
export async function main(argv: string[]): Promise<never> {
  let code: number = EXIT.software;
  for (const v of ['TENURE_BACKEND', 'TENURE_ENDPOINTS', 'TENURE_USER', 'TENURE_PASSWORD_FILE', 'TENURE_CACERT', 'TENURE_CERT', 'TENURE_KEY']) if (process.env[v] === '') delete process.env[v]; // empty is unset
  registerEnvSecrets(); // before anything can print
  try {
    await program((c) => (code = c)).parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.exitCode === 0) process.exit(0); // --help, --version
      if (e.code !== 'commander.help') process.stderr.write(redact(`tenure: ${e.message.replace(/^error: /, '')}\n`));
      process.exit(EXIT.usage);
    }
    process.stderr.write(redact(`tenure: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`));
    process.exit(EXIT.software);
  }
  process.exit(code);
}

await main(process.argv);
