/**
 * The baseline ZooKeeper lock written the way it often is by hand: every waiter sets a
 * getChildren watch on the parent and re-reads the children on every change (the herd).
 */
import zookeeper, { type Client } from 'node-zookeeper-client';

/** The baseline: a getChildren-watch lock, the way it is often written by hand. */
export class NaiveLock {
  wakeUps = 0;
  constructor(
    private readonly client: Client,
    private readonly path: string,
  ) {}

  async acquire(): Promise<string> {
    const node = await new Promise<string>((resolve, reject) =>
      this.client.create(`${this.path}/lock-`, Buffer.alloc(0), zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, (e, p) => (e ? reject(e) : resolve(p))),
    );
    const mine = node.slice(this.path.length + 1);
    for (;;) {
      let changed!: () => void;
      const fired = new Promise<void>((r) => (changed = r));
      const children = await new Promise<string[]>((resolve, reject) =>
        this.client.getChildren(
          this.path,
          () => {
            this.wakeUps++;
            changed();
          },
          (e, ch) => (e ? reject(e) : resolve(ch)),
        ),
      );
      if (children.sort()[0] === mine) return node;
      await fired;
    }
  }

  release(node: string): Promise<void> {
    return new Promise((resolve, reject) => this.client.remove(node, -1, (e) => (e ? reject(e) : resolve())));
  }
}

export async function rawClient(conn: string, path: string): Promise<Client> {
  const c = zookeeper.createClient(conn, { sessionTimeout: 10_000, retries: 0 });
  await new Promise<void>((resolve) => {
    c.once('connected', () => resolve());
    c.connect();
  });
  await new Promise<void>((resolve) => c.mkdirp(path, () => resolve()));
  return c;
}

