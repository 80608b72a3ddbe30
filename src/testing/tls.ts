import { execFile } from 'node:child_process';
import { chownSync, chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ServerStartError } from '../core/errors.js';
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

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await run('openssl', args, { cwd });
  } catch (e) {
    const err = e as { stderr?: string };
    throw new ServerStartError(`openssl ${args[0]} failed`, err.stderr ?? String(e), { cause: e });
  }
}

/**
 * Makes a fresh CA and a server and client certificate with `openssl` (EC P-256, 1 day), so no
 * test ever ships a key. `owner` gets the files (Postgres refuses a key others can read or that
 * it does not own).
 */
export async function makeCertificates(owner?: { uid: number; gid: number }): Promise<TestCertificates> {
  const dir = makeTempDir('tls');
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=tenure-test-ca'], dir);
  const leaf = async (name: string, cn: string, ext: string): Promise<void> => {
    await openssl(['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`], dir);
    await openssl(
      ['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '1', '-extfile', ext],
      dir,
    );
  };
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  await leaf('server', 'localhost', 'server.ext');
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
    ca: read('ca.crt'),
    cert: read('server.crt'),
    key: read('server.key'),
    clientCert: read('client.crt'),
    clientKey: read('client.key'),
  };
}
