import { execFile } from 'node:child_process';
import { chownSync, chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ServerStartError } from '../core/errors.js';
import { optionalBoolean, requireOptions } from '../core/validate.js';
import { makeTempDir } from './process.js';

const run = promisify(execFile);

/** A test CA with one server and one client certificate, as files and as PEM text. */
export interface TestCertificates {
  /** The dir holding every file (removed at exit with the kit's other temp dirs). */
  readonly dir: string;
  /** CA certificate: trust it on both sides. */
  readonly caFile: string;
  /** Server certificate for `127.0.0.1` and `localhost`, and its key. */
  readonly certFile: string;
  /** The server certificate's key. */
  readonly keyFile: string;
  /** A client certificate (CN `tenure-client`) signed by the same CA, and its key. */
  readonly clientCertFile: string;
  /** The client certificate's key. */
  readonly clientKeyFile: string;
  /** The server certificate expired two days ago (`expiredServer`): the kit's own probes then skip verification. */
  readonly expiredServer: boolean;
  /** PEM text of the files above (what Node's `tls` options take). */
  readonly ca: string;
  /** The server certificate (PEM). */
  readonly cert: string;
  /** The server key (PEM). */
  readonly key: string;
  /** The client certificate (PEM). */
  readonly clientCert: string;
  /** The client key (PEM). */
  readonly clientKey: string;
}

async function openssl(args: string[], cwd: string, expired = false): Promise<void> {
  try {
    // libfaketime signs as of three days ago: a one-day certificate that ended two days ago.
    if (expired) await run('faketime', ['-f', '-3d', 'openssl', ...args], { cwd });
    else await run('openssl', args, { cwd });
  } catch (e) {
    const err = e as { stderr?: string };
    throw new ServerStartError(`openssl ${args[0]} failed`, err.stderr ?? String(e), { cause: e });
  }
}

/** Options of {@link makeCertificates}. */
export interface CertificateOptions {
  /** Sign the server certificate so that it expired two days ago (needs `faketime`). @default false */
  expiredServer?: boolean;
}

/**
 * Makes a fresh CA and a server and client certificate with `openssl` (EC P-256, 1 day), so no
 * test ever ships a key. `owner` gets the files (Postgres refuses a key others can read or that
 * it does not own). Each call makes a new CA: another call's certificates are strangers to it.
 */
export async function makeCertificates(owner?: { uid: number; gid: number }, options: CertificateOptions = {}): Promise<TestCertificates> {
  const o = requireOptions('options', options, { expiredServer: true });
  const expiredServer = optionalBoolean('expiredServer', o.expiredServer, false);
  const dir = makeTempDir('tls');
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=tenure-test-ca'], dir);
  const leaf = async (name: string, cn: string, ext: string, expired = false): Promise<void> => {
    await openssl(['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`], dir);
    await openssl(
      ['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '1', '-extfile', ext],
      dir,
      expired,
    );
  };
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  await leaf('server', 'localhost', 'server.ext', expiredServer);
  await leaf('client', 'tenure-client', 'client.ext');
  for (const f of ['ca.crt', 'server.crt', 'server.key', 'client.crt', 'client.key']) {
    const p = join(dir, f);
    chmodSync(p, f.endsWith('.key') ? 0o600 : 0o644);
    if (owner) chownSync(p, owner.uid, owner.gid);
  }
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const read = (f: string): string => readFileSync(join(dir, f), 'utf8');
  return {
    dir,
    caFile: join(dir, 'ca.crt'),
    certFile: join(dir, 'server.crt'),
    keyFile: join(dir, 'server.key'),
    clientCertFile: join(dir, 'client.crt'),
    clientKeyFile: join(dir, 'client.key'),
    expiredServer,
    ca: read('ca.crt'),
    cert: read('server.crt'),
    key: read('server.key'),
    clientCert: read('client.crt'),
    clientKey: read('client.key'),
  };
}
