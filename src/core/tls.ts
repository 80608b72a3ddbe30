import { connect, type ConnectionOptions } from 'node:tls';
import type { TlsProblem } from './errors.js';

/**
 * Telling a certificate problem from an outage. Node names a failed verification by `code`
 * (CERT_HAS_EXPIRED, ERR_TLS_CERT_ALTNAME_INVALID, …) and a refusal by the peer by OpenSSL's
 * alert text; drivers pass either on, or only its text (grpc-js folds it into "No connection
 * established. Last error: …"). One table for every backend.
 */
const RULES: [RegExp, TlsProblem][] = [
  [/CERT_HAS_EXPIRED|CERT_NOT_YET_VALID|certificate has expired|certificate is not yet valid/i, 'expired'],
  [/ERR_TLS_CERT_ALTNAME_INVALID|does not match certificate's altnames/i, 'hostname-mismatch'],
  [/SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT|self[- ]signed certificate|unable to verify the first certificate|unable to get (local )?issuer certificate/i, 'unknown-ca'],
  [/alert certificate required|alert bad certificate|alert unknown ca|alert certificate unknown|alert unsupported certificate|requires a valid client certificate/i, 'client-certificate'],
  [/ERR_SSL_WRONG_VERSION_NUMBER|wrong version number|packet length too long|does not support SSL connections/i, 'plaintext'],
];

/** The certificate problem `e` (or an error in its `cause` chain) reports, if any. */
export function tlsProblem(e: unknown): { problem: TlsProblem; detail: string } | undefined {
  for (let x = e, depth = 0; x instanceof Error && depth < 8; x = x.cause, depth++) {
    const code = (x as { code?: unknown }).code;
    const text = `${typeof code === 'string' ? code : ''} ${x.message}`;
    for (const [re, problem] of RULES) if (re.test(text)) return { problem, detail: detailOf(x.message) };
  }
  return undefined;
}

/** The words of a TLS failure without grpc's wrapping and OpenSSL's error-stack prefix and source file. */
function detailOf(message: string): string {
  const inner = /Last error: (?:Error(?: \[\w+\])?: )?([\s\S]*?)(?:\s*\(\d{4}-[^)]*\))?\.? Resolution note/.exec(message)?.[1] ?? message;
  return inner.replace(/^[0-9A-F]+:error:[0-9A-F]+:SSL routines:\w+:/, '').replace(/:\.\.\/deps\/.*/, '').trim();
}

/** A TLS connection's options, as `tls.connect` takes them. */
export type TlsProbeOptions = ConnectionOptions;

/**
 * One TLS handshake to `host:port` with the client's own options (or none: any certificate
 * accepted), to learn what a driver that only saw a reset did not: whether the server speaks
 * TLS at all (`speaks`), and the certificate problem it reports (`problem`) — a TLS 1.3 server
 * refuses a client certificate only after the handshake, so the probe waits `settleMs` for the
 * alert. Never throws; done within `timeoutMs`.
 */
export function probeTls(host: string, port: number, options: TlsProbeOptions = {}, timeoutMs = 1000, settleMs = 200): Promise<{ speaks: boolean; problem?: ReturnType<typeof tlsProblem> }> {
  return new Promise((resolve) => {
    let speaks = false;
    const servername = /^[\d.]+$|:/.test(host) ? undefined : host;
    const sock = connect({ host, port, ...(servername ? { servername } : {}), rejectUnauthorized: false, ...options });
    let timer = setTimeout(() => done(), timeoutMs);
    function done(e?: Error & { code?: string }): void {
      clearTimeout(timer);
      sock.destroy();
      const problem = tlsProblem(e);
      // A TLS alert from the server means it speaks TLS, whatever it thinks of us.
      resolve({ speaks: speaks || /^ERR_SSL_(TLSV1|TLSV13|SSLV3)_ALERT/.test(e?.code ?? '') || (problem !== undefined && problem.problem !== 'plaintext'), ...(problem ? { problem } : {}) });
    }
    sock.once('secureConnect', () => {
      speaks = true;
      clearTimeout(timer);
      timer = setTimeout(() => done(), settleMs);
    });
    sock.on('error', (e: Error) => done(e)); // on, not once: a TLS socket can report a second error (an alert after a reset), which unheard would crash the process
    sock.once('close', () => done());
  });
}
