import { TenureError } from '../core/errors.js';
import { createServer, connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { request } from 'node:http';
import { request as httpsRequest } from 'node:https';

const handedOut = new Set<number>();

/**
 * A free TCP port on 127.0.0.1. Ports handed out by this process are not handed out again, and
 * servers retry start-up on fresh ports when a port was taken meanwhile by another process.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = createServer();
      srv.unref();
      srv.once('error', reject);
      srv.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
        const addr = srv.address();
        const p = typeof addr === 'object' && addr ? addr.port : 0;
        srv.close(() => resolve(p));
      });
    });
    if (port > 0 && !handedOut.has(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new TenureError('no free port found on 127.0.0.1');
}

/** `n` distinct free ports. */
export async function freePorts(n: number): Promise<number[]> {
  const ports: number[] = [];
  for (let i = 0; i < n; i++) ports.push(await freePort());
  return ports;
}

/**
 * Connects, writes `payload`, and reads until the peer closes, `until` matches, or `timeoutMs`
 * passes. Rejects on connection errors and timeouts. Used for ZooKeeper four-letter words and
 * Redis PING without any client library.
 */
export function tcpExchange(
  port: number,
  payload: string,
  options: { timeoutMs?: number; until?: (received: string) => boolean; host?: string; tls?: { ca: string; cert?: string; key?: string; rejectUnauthorized?: boolean } } = {},
): Promise<string> {
  const { timeoutMs = 1000, until, host = '127.0.0.1', tls } = options;
  return new Promise<string>((resolve, reject) => {
    let received = '';
    let settled = false;
    const sock: Socket = tls ? tlsConnect({ host, port, ...tls, servername: 'localhost' }) : connect({ host, port });
    const finish = (err?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(received);
    };
    const timer = setTimeout(() => finish(new TenureError(`no answer from ${host}:${port} within ${timeoutMs} ms`)), timeoutMs);
    sock.setEncoding('utf8');
    sock.once(tls ? 'secureConnect' : 'connect', () => sock.write(payload));
    sock.on('data', (d: string) => {
      received += d;
      if (until?.(received)) finish();
    });
    sock.once('end', () => finish());
    sock.on('error', (e) => finish(e)); // (every error: a TLS socket can report a second one)
  });
}

/** An HTTP request to 127.0.0.1 with a timeout; resolves with status and body. */
export function httpRequest(
  port: number,
  path: string,
  options: { method?: string; body?: string; timeoutMs?: number; host?: string; tls?: { ca: string; cert?: string; key?: string; rejectUnauthorized?: boolean } } = {},
): Promise<{ status: number; body: string }> {
  const { method = 'GET', body, timeoutMs = 1000, host = '127.0.0.1', tls } = options;
  return new Promise((resolve, reject) => {
    const req = (tls ? httpsRequest : request)(
      { host, port, path, method, timeout: timeoutMs, headers: body ? { 'content-type': 'application/json' } : {}, ...(tls ? { ...tls, servername: 'localhost' } : {}) },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (data += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: data }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new TenureError(`HTTP ${method} ${path} timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    if (body) req.write(body);
    req.end();
  });
}
